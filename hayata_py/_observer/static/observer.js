// The hayata observer page: renders the server's live messages, asks before acting.
"use strict";

const TOKEN_KEY = "hayata-observer-token";
const view = {state: null, agent: null, invocation: null, events: new Map(), tasksTimer: 0};
const $ = (id) => document.getElementById(id);

function token() {
  const params = new URLSearchParams(location.search);
  const given = params.get("token");
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    history.replaceState(null, "", location.pathname);  // keep it out of the address bar
  }
  return given || sessionStorage.getItem(TOKEN_KEY) || "";
}
const TOKEN = token();

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

// Like Python's shlex.quote: the page shows the same commands the server does.
function shellQuote(text) {
  if (text === "") return "''";
  return /^[\w@%+=:,./-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\"'\"'") + "'";
}

function banner(text) {
  $("banner").textContent = text || "";
  $("banner").classList.toggle("hidden", !text);
}

async function api(path, body) {
  const options = {headers: {"X-Hayata-Token": TOKEN}};
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({error: {code: "bad_response",
    message: `HTTP ${response.status}`}}));
  if (!response.ok) throw Object.assign(new Error(data.error.message), data.error);
  return data;
}

function log(what, cli, outcome, failed) {
  const time = new Date().toLocaleTimeString();
  $("log").prepend(el("li", {class: failed ? "error" : ""},
    el("span", {class: "when"}, time), el("span", {class: "what"}, what),
    el("span", {class: "outcome"}, outcome), cli ? el("code", {class: "cli"}, cli) : null));
}

// -- confirmation -------------------------------------------------------------------

function confirmAction({title, text, cli, input, label, run}) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-error").textContent = "";
  const field = $("confirm-input");
  $("confirm-label").classList.toggle("hidden", input === undefined);
  $("confirm-label").querySelector("span").textContent = label || "";
  field.value = input === undefined ? "" : input;
  const command = () => (typeof cli === "function" ? cli(field.value) : cli);
  $("confirm-cli").textContent = command();
  field.oninput = () => { $("confirm-cli").textContent = command(); };
  $("confirm-ok").onclick = async (event) => {
    event.preventDefault();
    let value;
    if (input !== undefined) {
      try { value = JSON.parse(field.value); } catch (err) {
        $("confirm-error").textContent = `not valid JSON: ${err.message}`;
        return;
      }
    }
    try {
      const answer = await run(value);
      dialog.close();
      log(title, answer.cli, "done", false);
    } catch (err) {
      $("confirm-error").textContent = `${err.message} [${err.code}]`;
      log(title, command(), `refused: ${err.message} [${err.code}]`, true);
    }
  };
  dialog.showModal();
}

// -- tree -----------------------------------------------------------------------------

function treeRow(row, previous) {
  const path = row.path.join("/");
  const before = previous.get(path);
  const line = el("div", {class: "node-line", "data-path": path, "data-role": row.role,
                          "data-pid": row.pid || ""},
    el("span", {class: `role ${row.role}`}, row.role),
    el("span", {class: "ident"}, row.id),
    el("span", {class: "pid"}, "pid ", el("b", {}, row.pid || "–")),
    el("span", {class: `restarts${row.restarts ? " some" : ""}`}, `restarts ${row.restarts || 0}`),
    el("span", {class: `status ${row.status}`}, row.status + (row.remote ? " (remote)" : "")),
    el("span", {class: "spacer"}),
    row.killable ? el("button", {class: "danger kill", "data-path": path, onclick: () =>
      confirmAction({
        title: `Kill ${row.role} ${row.id}`,
        text: `SIGKILL pid ${row.pid}${row.agent ? ` (agent ${row.agent})` : ""}? ` +
              "Its supervisor restarts it by its restart rules.",
        cli: row.cli,
        run: () => api("/api/kill", {path: row.path, pid: row.pid}),
      })}, "kill") : null);
  if (before !== undefined && before !== row.pid) line.classList.add("flash");
  const item = el("li", {}, line);
  if (row.children.length) {
    item.append(el("ul", {}, ...row.children.map((child) => treeRow(child, previous))));
  }
  return item;
}

function renderTree(tree) {
  const previous = new Map();
  for (const line of document.querySelectorAll("#tree .node-line")) {
    previous.set(line.dataset.path, Number(line.dataset.pid) || null);
  }
  $("tree").replaceChildren(...(tree ? [treeRow(tree, previous)] : []));
}

// -- agents, invocations, events, tasks -------------------------------------------------

function agentButtons(agent) {
  const hint = view.state.system.hint;
  const buttons = [el("button", {class: "run", onclick: (e) => { e.stopPropagation();
    confirmAction({title: `Run ${agent.id}`, text: "Start an invocation with this input " +
      "(JSON); its events appear below as they arrive.", input: "null", label: "input",
      cli: (text) => `hayata run ${shellQuote(agent.id)} --input ${shellQuote(text)} --stream${hint}`,
      run: async (value) => { const a = await api("/api/run", {agent: agent.id, input: value});
        select(agent.id, a.invocation_id); return a; }}); }}, "run")];
  if (agent.status === "recovery_required") {
    buttons.push(el("button", {class: "recover", onclick: (e) => { e.stopPropagation();
      confirmAction({title: `Recover ${agent.id}`, text: `Continue invocation ` +
        `${agent.invocation_id}: completed tasks are reused, not-started ones run; ` +
        "uncertain ones refuse until resolved.", cli: agent.cli.recover,
        run: async () => { const a = await api("/api/recover", {agent: agent.id});
          select(agent.id, a.invocation_id); return a; }}); }}, "recover"));
    buttons.push(el("button", {class: "danger abandon", onclick: (e) => { e.stopPropagation();
      confirmAction({title: `Abandon ${agent.invocation_id}`, text: "End it as failed " +
        "(abandoned) and free the agent. Nothing of it runs again.", cli: agent.cli.abandon,
        run: () => api("/api/abandon", {agent: agent.id,
                                        invocation_id: agent.invocation_id})}); }},
      "abandon"));
  }
  return buttons;
}

function renderAgents(agents) {
  if (!view.agent && agents.length) view.agent = agents[0].id;
  $("agents").tBodies[0].replaceChildren(...agents.map((agent) => el("tr", {
    class: `selectable${agent.id === view.agent ? " selected" : ""}`, "data-agent": agent.id,
    onclick: () => select(agent.id, null)},
    el("td", {class: "mono"}, agent.id),
    el("td", {class: `status ${agent.status}`}, agent.status),
    el("td", {class: "mono"}, agent.invocation_id || "–"),
    el("td", {class: "counts"}, agent.counts && agent.counts.max_invocations
      ? `${agent.counts.running}/${agent.counts.max_invocations} · ${agent.counts.paused} · `
        + `${agent.counts.unfinished}` : "–"),
    el("td", {class: "actions"}, ...agentButtons(agent)))));
  const agent = agents.find((a) => a.id === view.agent);
  $("inv-agent").textContent = agent ? `of ${agent.id}` : "";
  const rows = agent ? agent.invocations : [];
  if (agent && !view.invocation && rows.length) view.invocation = rows[0].invocation_id;
  $("invocations").tBodies[0].replaceChildren(...rows.map((inv) => el("tr", {
    class: `selectable${inv.invocation_id === view.invocation ? " selected" : ""}`,
    "data-invocation": inv.invocation_id, onclick: () => select(agent.id, inv.invocation_id)},
    el("td", {class: "mono"}, inv.invocation_id),
    el("td", {class: `status ${inv.status}`}, inv.status),
    el("td", {}, inv.step), el("td", {class: "mono"}, inv.executing.join(", ")),
    el("td", {class: "mono"}, inv.error || ""))));
}

function select(agentId, invocationId) {
  view.agent = agentId;
  view.invocation = invocationId;
  if (view.state) renderAgents(view.state.agents);
  renderEvents();
  refreshTasks();
}

function renderEvents() {
  const list = view.events.get(view.invocation) || [];
  $("ev-inv").textContent = view.invocation ? `of ${view.invocation}` : "";
  $("events").replaceChildren(...(list.length ? list.map((m) => m.kind === "event"
    ? el("li", {class: "event", "data-sequence": m.sequence},
         el("span", {class: "seq"}, m.sequence), el("span", {class: "type"}, m.type),
         el("span", {class: "data"}, JSON.stringify(m.data)))
    : el("li", {class: `result${m.ok ? "" : " failed"}`},
         el("span", {class: "seq"}, "end"), el("span", {class: "type"}, m.ok ? "result" : "error"),
         el("span", {class: "data"}, JSON.stringify(m.ok ? m.result : m.error))))
    : [el("li", {class: "muted"}, view.invocation
        ? "Events stream for invocations run or recovered from this page."
        : "Select an invocation.")]));
}

function refreshTasks() {
  clearTimeout(view.tasksTimer);
  view.tasksTimer = setTimeout(loadTasks, 100);
}

async function loadTasks() {
  const agent = view.agent, invocation = view.invocation;
  if (!agent || !invocation) { $("tasks").tBodies[0].replaceChildren(); return; }
  let data;
  try {
    data = await api(`/api/tasks?agent=${encodeURIComponent(agent)}` +
                     `&invocation=${encodeURIComponent(invocation)}`);
  } catch (err) { $("tasks-cli").textContent = err.message; return; }
  if (agent !== view.agent || invocation !== view.invocation) return;
  const hint = view.state.system.hint;
  $("tasks-cli").textContent = data.cli;
  $("tasks").tBodies[0].replaceChildren(...data.tasks.map((task) => el("tr",
    {"data-task": task.task_id, title: task.task_id},
    el("td", {class: "mono"}, task.node_id), el("td", {}, task.step),
    el("td", {}, task.status), el("td", {}, task.attempt),
    el("td", {}, el("span", {class: `class ${task.classification}`},
                    task.classification.replace("_", " "))),
    el("td", {class: "actions"}, task.classification === "uncertain"
      ? el("button", {class: "resolve", onclick: () => confirmAction({
          title: `Resolve task of node ${task.node_id}`,
          text: `Task ${task.task_id} started but recorded no result. Check the external ` +
                "system, then record what the node returned; recover then reuses it.",
          input: "{}", label: "result (a JSON object)",
          cli: (text) => `hayata resolve ${shellQuote(agent)} ${shellQuote(task.task_id)} ` +
                         `--result ${shellQuote(text)}${hint}`,
          run: (value) => api("/api/resolve", {agent, task_id: task.task_id, result: value}),
        })}, "resolve") : null))));
}

// -- live messages ---------------------------------------------------------------------

function onState(state) {
  // Re-render only what changed: a row under the pointer stays the same element.
  const before = view.state || {};
  const same = (key) => JSON.stringify(before[key]) === JSON.stringify(state[key]);
  const changed = !same("agents");
  view.state = state;
  const sys = state.system;
  $("system").replaceChildren("data dir ", el("b", {}, sys.data_dir), " · name ",
    el("b", {}, sys.name), " · admin port ", el("b", {}, sys.admin_port), " · session ",
    el("b", {}, sys.session_id));
  banner(state.alive ? "" : state.error);
  if (!same("tree")) renderTree(state.tree);
  if (changed) { renderAgents(state.agents); refreshTasks(); }
  if (!before.system) renderEvents();
}

function onInvocationMessage(message) {
  const list = view.events.get(message.invocation_id) || [];
  if (message.kind === "event") {
    if (list.some((m) => m.kind === "event" && m.sequence === message.sequence)) return;
    list.push(message);
    list.sort((a, b) => (a.kind === "event" ? a.sequence : Infinity) -
                        (b.kind === "event" ? b.sequence : Infinity));
  } else {
    list.push(message);
  }
  view.events.set(message.invocation_id, list);
  if (message.invocation_id === view.invocation) { renderEvents(); refreshTasks(); }
  if (message.kind === "lost") log(`invocation ${message.invocation_id}`, null, message.message, true);
}

function connect() {
  if (!TOKEN) {
    banner("No token: open the URL that `hayata observe` printed (it ends in ?token=…).");
    return;
  }
  const source = new EventSource(`/api/events?token=${encodeURIComponent(TOKEN)}`);
  source.onopen = () => { $("live").className = "live on"; $("live").textContent = "● live"; };
  source.onerror = async () => {
    $("live").className = "live off"; $("live").textContent = "○ reconnecting";
    try { await api("/api/ping"); } catch (err) {
      banner(`${err.message}`);
      if (err.code && err.code.startsWith("token")) source.close();
    }
  };
  source.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.kind === "state") onState(message);
    else if (message.invocation_id) onInvocationMessage(message);
  };
}

$("confirm-cancel").addEventListener("click", () => $("confirm").close());
connect();
