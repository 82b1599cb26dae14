"""Drill 13's Python client: follow a run's stream with ``langgraph-sdk``'s
``join_stream`` and print each event as ``id event data`` (data trimmed).

    python -m examples.drills.serve_follow URL THREAD RUN [LAST_EVENT_ID]

The SDK itself reconnects to the stream's ``Location`` with the last
``Last-Event-ID`` it saw when the connection drops (about 17 s of attempts);
if it gives up (the server was down longer), this script joins again from
the last id it printed, until the server answers (up to 120 s). It ends when
the stream ends (the run ended) and prints ``stream ended``.
"""

from __future__ import annotations

import json
import sys
import time

import httpx
from langgraph_sdk import get_sync_client

WIDTH = 150
"""Characters of each event's data printed."""


def follow(url: str, thread: str, run: str, last: str) -> None:
    deadline = time.monotonic() + 120.0
    while True:
        try:
            with get_sync_client(url=url, timeout=30.0) as client:
                for part in client.runs.join_stream(thread, run, last_event_id=last,
                                                    stream_mode=["values", "updates"]):
                    last = str(part.id)
                    data = json.dumps(part.data)
                    print(f"sdk: {part.id} {part.event} {data[:WIDTH]}"
                          + (" ..." if len(data) > WIDTH else ""), flush=True)
            print(f"sdk: stream ended (last id {last})", flush=True)
            return
        except httpx.HTTPError as exc:
            if time.monotonic() > deadline:
                raise
            print(f"sdk: {type(exc).__name__} ({exc}); joining again from "
                  f"Last-Event-ID {last}", flush=True)
            time.sleep(1.0)  # the server is down: ask again at a human pace


def main() -> None:
    url, thread, run = sys.argv[1:4]
    follow(url, thread, run, sys.argv[4] if len(sys.argv) > 4 else "-1")


if __name__ == "__main__":
    main()
