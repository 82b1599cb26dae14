#!/usr/bin/env bash
# Drill 13 (VM_RECOVERY_TESTS.md): `hayata serve` killed -9 with streams open.
#
#   examples/drills/serve_drill.sh          # from the repository root
#
# Serves drill 12's graph (examples/drills/lg_drill.py: plan -> charge ->
# notify; charge waits for the gate file $D/lg-gate, which never opens) as
# assistant "order"; streams a run with curl -N and langgraph-sdk's
# join_stream; kills -9 the server process while charge runs, shows that its
# actor processes end with it (and kills them, as a whole-host crash would,
# should any be left after 5 s), restarts the server on the same data dir; the streams resume from
# Last-Event-ID; the run asks about the uncertain charge node, which is
# resolved with curl through POST /hayata/threads/{t}/tasks/{task}/resolve;
# the same run goes on to notify and its stream ends normally.
#
# Env: D (work dir, default /tmp/hayata-serve-drill), PORT (default 2124),
# PYTHON (default python; it must import hayata_py and langgraph-sdk).
set -euo pipefail

D=${D:-/tmp/hayata-serve-drill}
PORT=${PORT:-2124}
PYTHON=${PYTHON:-python}
URL=http://127.0.0.1:$PORT
export D
rm -rf "$D" && mkdir -p "$D"
echo '{"graphs": {"order": "examples.drills.lg_drill:builder"}}' > "$D/langgraph.json"

step() { printf '\n### %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; eval "$@"; }
sse() { tr -d '\r' < "$1" | grep -v '^$' | cut -c1-170; }
wait_for() {  # wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds, or fail
    local what=$1 limit=$2; shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS > deadline)); then echo "drill: $what not reached in ${limit}s" >&2; exit 1; fi
        sleep 0.1
    done
}
alive() { ps -o pid= -s "$1" >/dev/null 2>&1; }
serve() {
    $PYTHON -m hayata_py serve --config "$D/langgraph.json" --data-dir "$D/data" \
        --port "$PORT" >>"$D/serve.log" 2>&1 &
    SERVER=$!
    wait_for "the server answering /ok" 120 curl -sf "$URL/ok"
}
last_id() { tr -d '\r' < "$1" | sed -n 's/^id: //p' | tail -1; }
cleanup() {
    kill -TERM "$SERVER" 2>/dev/null || true
    [[ -n ${SESSION:-} ]] && kill -9 -- "-$SESSION" 2>/dev/null || true
}
trap cleanup EXIT

step "1. Serve the graph; open a stream with curl -N and one with the SDK"
printf '$ hayata serve --config %s/langgraph.json --data-dir %s/data --port %s &\n' "$D" "$D" "$PORT"
serve
show "T=\$(curl -s -X POST $URL/threads -H 'content-type: application/json' -d '{}' | jq -r .thread_id); echo \$T"
printf '$ curl -sN -X POST %s/threads/$T/runs/stream -H '"'"'content-type: application/json'"'"' -d '"'"'{"assistant_id": "order", "input": {"log": []}, "stream_mode": ["values", "updates"]}'"'"' > $D/curl-1.sse &\n' "$URL"
curl -sN -X POST "$URL/threads/$T/runs/stream" -H 'content-type: application/json' \
    -d '{"assistant_id": "order", "input": {"log": []}, "stream_mode": ["values", "updates"]}' \
    > "$D/curl-1.sse" &
CURL=$!
wait_for "the stream's metadata" 60 grep -q run_id "$D/curl-1.sse"
R=$(tr -d '\r' < "$D/curl-1.sse" | sed -n 's/^data: //p' | head -1 | jq -r .run_id)
echo "R=$R"
printf '$ python -m examples.drills.serve_follow %s $T $R > $D/sdk-1.txt &\n' "$URL"
$PYTHON -m examples.drills.serve_follow "$URL" "$T" "$R" > "$D/sdk-1.txt" 2>&1 &
SDK=$!
wait_for "charge running" 60 grep -q "start charge" "$D/lg-effects.log"
wait_for "the SDK's first events" 60 grep -q "sdk: 3 " "$D/sdk-1.txt"
show "sse $D/curl-1.sse"
show "cat $D/sdk-1.txt"
show "cat $D/lg-effects.log"

step "2. kill -9 the server process while charge runs"
SESSION=$(jq -r .session_id "$D/data/serve.json")
show "jq -c . $D/data/serve.json"
show "ps -o pid,sid,args -s $SESSION | cut -c1-110"
show "kill -9 $SERVER"
KILLED=$SECONDS
wait "$SERVER" 2>/dev/null || true
rc=0; wait "$CURL" || rc=$?
echo "curl (the open stream) exited with $rc"
deadline=$((SECONDS + 5))
while alive "$SESSION" && ((SECONDS < deadline)); do sleep 0.1; done
if alive "$SESSION"; then
    echo "5 s after the kill, the server's actor processes (session $SESSION) still run:"
    show "ps -o pid,sid,args -s $SESSION | cut -c1-110"
    show "cat $D/lg-effects.log"
    echo "(charge still waits for its gate in its actor process.) Kill them too, as a whole-host crash would:"
    show "kill -9 -- -$SESSION"
    wait_for "the actor processes gone" 30 bash -c "! ps -o pid= -s $SESSION"
else
    echo "the server's actor processes (session $SESSION) ended with it"
fi
show "cat $D/sdk-1.txt"

step "3. Restart the server on the same data dir; the streams resume from Last-Event-ID"
printf '$ hayata serve --config %s/langgraph.json --data-dir %s/data --port %s &\n' "$D" "$D" "$PORT"
serve
echo "(answering /ok $((SECONDS - KILLED)) s after the kill -9)"
SESSION=$(jq -r .session_id "$D/data/serve.json")
LAST=$(last_id "$D/curl-1.sse")
echo "LAST=$LAST   # the last id curl got"
printf '$ curl -sN -H "Last-Event-ID: $LAST" %s/threads/$T/runs/$R/stream > %s/curl-2.sse\n' "$URL" "$D"
rc=0; curl -sN -H "Last-Event-ID: $LAST" "$URL/threads/$T/runs/$R/stream" > "$D/curl-2.sse" || rc=$?
show "sse $D/curl-2.sse"
echo "curl exited with $rc"
wait_for "the SDK's stream ended" 120 bash -c "! kill -0 $SDK"
show "cat $D/sdk-1.txt"

step "4. The run asks about charge; GET of the run names the ways out"
show "curl -s $URL/threads/\$T/runs/\$R | jq -c '{status, hayata}'"
show "curl -s $URL/threads/\$T | jq -c '{status}'"
# the hayata commands reach the server's system too (its system.json)
show "$PYTHON -m hayata_py tasks serve.order --data-dir $D/data | cut -c1-170"
TASK=$(curl -s "$URL/threads/$T/runs/$R" | jq -r '.hayata.uncertain[0].task_id')
echo "TASK=$TASK"

step "5. Resolve charge with curl (the provider says it went through)"
show "curl -s -w ' %{http_code}\n' -X POST $URL/hayata/threads/\$T/tasks/\$TASK/resolve -H 'content-type: application/json' -d '{\"completed\": \"yes\"}'"
show "curl -s -X POST $URL/hayata/threads/\$T/tasks/\$TASK/resolve -H 'content-type: application/json' -d '{\"completed\": {\"log\": [\"charged\"]}}' | jq -c '{task_id, answer, uncertain, run: (.run | {run_id, status})}'"
LAST=$(last_id "$D/curl-2.sse")
show "curl -sN -H 'Last-Event-ID: $LAST' $URL/threads/\$T/runs/\$R/stream > $D/curl-3.sse; echo \"curl exited with \$?\""
show "sse $D/curl-3.sse"
show "$PYTHON -m examples.drills.serve_follow $URL \$T \$R $LAST"
show "curl -s $URL/threads/\$T/runs/\$R | jq -c '{status, hayata}'"
show "curl -s $URL/threads/\$T | jq -c '{status, values}'"
show "cat $D/lg-effects.log"

step "6. Stop"
show "kill -TERM $SERVER; wait $SERVER || true"
wait_for "the actor processes gone" 60 bash -c "! ps -o pid= -s $SESSION"
echo "session $SESSION: no process left"
SESSION=
