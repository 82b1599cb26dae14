"""A scripted OpenAI-compatible server on loopback, for examples/openai_agent.py.

``POST /v1/chat/completions`` (``stream: true`` only) answers with server-sent
``chat.completion.chunk`` events, as OpenAI, vLLM and Ollama do. The "model"
follows a script read from the transcript it is sent, like a model that
follows the user's instruction:

1. no tool result yet: a few words of text, then a ``fetch_page`` call for
   the first URL in the user's message (its arguments in several fragments);
2. after the page: a ``send_email`` call to the address in the user's
   message, the page's text as the body;
3. after the email's tool result: a final answer, streamed word by word
   ("I emailed ..." if the tool said ``sent``, else "I did not send ...").

Failures, deterministic: the first request of each conversation (keyed by
its first user message) gets a 429 with an OpenAI error body, and the first
``GET /pages/{name}`` of each page a 503. Every request is logged in
``FakeOpenAI.requests`` as ``(method, path, status)``, so a test can compare
what reached the server with the durable record, and the transcript of each
answered chat request in ``FakeOpenAI.transcripts``.

Run it by hand for the example (``--port``, default 8001)::

    python -m tests.fake_openai &
    export OPENAI_BASE_URL=http://127.0.0.1:8001/v1 OPENAI_API_KEY=x
    python examples/openai_agent.py \\
        'Read http://127.0.0.1:8001/pages/launch and email it to team@example.com'
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.helpers import eventually

PAGES = {"launch": "The launch is on 12 May."}
TOOLS = {"fetch_page", "send_email"}
URL = re.compile(r"https?://\S+[^\s.,;:!?)]")
ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


@dataclass
class FakeOpenAI:
    """The app and what it has seen; one instance per test."""

    requests: list[tuple[str, str, int]] = field(default_factory=list)
    transcripts: list[list[dict[str, Any]]] = field(default_factory=list)
    """The messages of every chat completion answered (not refused), in order."""
    models: set[str] = field(default_factory=set)
    """The ``model`` of every chat completion request."""
    conversations: set[str] = field(default_factory=set)
    pages_served: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/pages/{name}", self.page, methods=["GET"]),
        ])

    def log(self, request: Request, status: int) -> None:
        with self.lock:
            self.requests.append((request.method, request.url.path, status))

    def chat_statuses(self) -> list[int]:
        """The status of every chat completion request, in order."""
        with self.lock:
            return [s for _, path, s in self.requests if path == "/v1/chat/completions"]

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        problem = _check(request, body)
        if problem:
            self.log(request, 400)
            return _error(400, problem, "invalid_request_error")
        messages: list[dict[str, Any]] = body["messages"]
        with self.lock:
            self.models.add(body["model"])
        question = next(m["content"] for m in messages if m["role"] == "user")
        with self.lock:
            first = question not in self.conversations
            self.conversations.add(question)
        if first:
            self.log(request, 429)
            return _error(429, "Rate limit reached for requests", "rate_limit_error",
                          headers={"retry-after": "0"})
        self.log(request, 200)
        with self.lock:
            self.transcripts.append(messages)
        return StreamingResponse(_chunks(body["model"], _turn(question, messages)),
                                 media_type="text/event-stream")

    async def page(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in PAGES:
            self.log(request, 404)
            return PlainTextResponse("not found", status_code=404)
        with self.lock:
            first = name not in self.pages_served
            self.pages_served.add(name)
        status = 503 if first else 200
        self.log(request, status)
        if first:
            return PlainTextResponse("busy, try again", status_code=503)
        return PlainTextResponse(PAGES[name])


def _check(request: Request, body: dict[str, Any]) -> str | None:
    """What is wrong with a request, as OpenAI would refuse it, or None."""
    if not request.headers.get("authorization", "").startswith("Bearer "):
        return "missing bearer token"
    if body.get("stream") is not True:
        return "this fake answers stream: true only"
    if not body.get("model") or not body.get("messages"):
        return "model and messages are required"
    names = {t.get("function", {}).get("name") for t in body.get("tools", [])}
    if names != TOOLS:
        return f"expected the tools {sorted(TOOLS)}, got {sorted(map(str, names))}"
    return None


def _error(status: int, message: str, kind: str,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None,
                                   "code": kind}}, status_code=status, headers=headers)


@dataclass
class _Turn:
    text: list[str]
    call: tuple[str, dict[str, Any]] | None = None
    call_id: str = ""


def _turn(question: str, messages: list[dict[str, Any]]) -> _Turn:
    """The scripted answer to a transcript (see the module docstring)."""
    calls = {c["id"]: c["function"]["name"] for m in messages if m["role"] == "assistant"
             for c in m.get("tool_calls") or []}
    results = {calls.get(m["tool_call_id"]): m["content"] for m in messages
               if m["role"] == "tool"}
    turn = f"call_{len(calls) + 1}"
    if "fetch_page" not in results:
        url = URL.search(question)
        return _Turn(["Let", " me", " read", " the", " page."],
                     ("fetch_page", {"url": url.group(0) if url else ""}), turn)
    if "send_email" not in results:
        address = ADDRESS.search(question)
        return _Turn([], ("send_email", {"to": address.group(0) if address else "",
                                         "subject": "From the page",
                                         "body": results["fetch_page"]}), turn)
    if results["send_email"].startswith("sent"):
        words = f"I emailed the page to you: {results['fetch_page']}"
    else:
        words = "Understood, I did not send the email."
    return _Turn(re.findall(r"\s*\S+", words))


async def _chunks(model: str, turn: _Turn) -> AsyncIterator[str]:
    """The turn as ``chat.completion.chunk`` events, then ``[DONE]``."""
    def event(delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                 "model": model, "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\n\n"

    yield event({"role": "assistant", "content": ""})
    for token in turn.text:
        yield event({"content": token})
    if turn.call is not None:
        name, arguments = turn.call
        yield event({"tool_calls": [{"index": 0, "id": turn.call_id, "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        encoded = json.dumps(arguments)
        middle = len(encoded) // 2  # arguments arrive in fragments, as from OpenAI
        for part in (encoded[:middle], encoded[middle:]):
            yield event({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
    yield event({}, "tool_calls" if turn.call else "stop")
    yield "data: [DONE]\n\n"


@contextmanager
def serve(port: int = 0) -> Iterator[tuple[FakeOpenAI, str]]:
    """Run a fresh fake on loopback in a thread; yield it and its base URL
    (``http://127.0.0.1:PORT``); stop it and join the thread on exit."""
    fake = FakeOpenAI()
    server = uvicorn.Server(uvicorn.Config(fake.app(), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="fake-openai", daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started or not thread.is_alive(), timeout=30,
                   message="the fake OpenAI server started")
        if not server.started:
            raise RuntimeError("the fake OpenAI server did not start")
        bound = server.servers[0].sockets[0].getsockname()[1]
        yield fake, f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        thread.join(30)
        if thread.is_alive():
            raise RuntimeError("the fake OpenAI server did not stop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    with serve(args.port) as (_, url):
        print(f"fake OpenAI-compatible server on {url}/v1 (Ctrl-C stops it)", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
