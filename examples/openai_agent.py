"""A tool-calling agent on the official ``openai`` client, for any
OpenAI-compatible server: OpenAI, vLLM, Ollama, a local gateway.

``pip install 'hayata_py[openai]'``, then point it at a server::

    export OPENAI_BASE_URL=http://localhost:11434/v1   # Ollama; unset: OpenAI
    export OPENAI_API_KEY=sk-...                       # any value for a local server
    export OPENAI_MODEL=llama3.1                       # default gpt-4o-mini
    python examples/openai_agent.py 'Read https://example.com and email a summary to me@example.com'

The model (an ``async def`` node) streams its tokens through ``ctx.streamer``
(``node_partial_result`` events) and may ask for two tools: ``fetch_page``
(read-only, an HTTP GET) and ``send_email`` (a real effect: here it appends
to an outbox file, with the task's idempotency key). The policy runs each
requested tool, then asks the model again, until it answers without tools.

- Retries are the runtime's, never the client's: the client has
  ``max_retries=0``, and the model node a ``hy.RetryPolicy`` on
  ``RateLimitError`` (429), connection errors and 5xx, so every attempt is a
  durable attempt of the task (``hayata tasks``, ``node_retrying`` events)
  and its backoff survives a restart. ``fetch_page`` is retried the same way
  on 429, 5xx and network errors (``ToolUnavailable``); other HTTP errors go
  back to the model as the tool's answer.
- Before ``send_email`` the policy pauses with the call as payload;
  ``agent.resume(inv, {"approve": True})`` sends it, ``{"approve": False,
  "why": ...}`` tells the model it was refused.

The environment is read in the node's process: set it before the system
starts (its processes inherit it). ``fetch_page`` fetches any URL the model
names; a real deployment would restrict it to hosts it trusts.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make "examples.openai_agent" importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openai import AsyncOpenAI

import hayata_py as hy

MODEL = "gpt-4o-mini"
REQUEST_TIMEOUT = 60.0  # below the node's timeout: a slow server is a retried APITimeoutError
PAGE_LIMIT = 20_000  # characters of a page handed to the model
NEEDS_APPROVAL = {"send_email"}
SYSTEM_PROMPT = ("You are a helpful assistant. Use fetch_page to read web pages and "
                 "send_email to send an email; a person approves every email first.")
# The JSON of the chat completions API (typed as Any: the client's TypedDict names
# for it differ between its versions).
TOOL_SPECS: list[Any] = [
    {"type": "function", "function": {
        "name": "fetch_page", "description": "Fetch a web page and return its text.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}},
                       "required": ["url"]}}},
    {"type": "function", "function": {
        "name": "send_email", "description": "Send an email.",
        "parameters": {"type": "object", "properties": {
            "to": {"type": "string"}, "subject": {"type": "string"},
            "body": {"type": "string"}}, "required": ["to", "subject", "body"]}}},
]
TOOLS = {spec["function"]["name"] for spec in TOOL_SPECS}


class ToolUnavailable(Exception):
    """A tool's service is busy or unreachable (429, 5xx, a network error): worth a retry."""


async def model(ctx: hy.NodeContext) -> dict[str, Any]:
    """One chat completion, streamed: tokens go out as partials, tool calls are
    assembled from their fragments. Appends the assistant message to the transcript."""
    messages = list(ctx.state["messages"]) or [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": ctx.input["question"]}]
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    # OPENAI_BASE_URL and OPENAI_API_KEY are read by the client itself.
    async with AsyncOpenAI(max_retries=0, timeout=REQUEST_TIMEOUT) as client:
        stream = await client.chat.completions.create(
            model=os.environ.get("OPENAI_MODEL", MODEL), messages=messages,
            tools=TOOL_SPECS, stream=True)
        async for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                if ctx.streamer is not None:
                    ctx.streamer({"token": delta.content})
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {
                    "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                if part.id:
                    call["id"] = part.id
                if part.function and part.function.name:
                    call["function"]["name"] = part.function.name
                if part.function and part.function.arguments:
                    call["function"]["arguments"] += part.function.arguments
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        reply["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"messages": [*messages, reply]}


def fetch_page(ctx: hy.NodeContext) -> dict[str, Any]:
    """GET the page at ``url``; busy or unreachable raises ``ToolUnavailable``."""
    url = str(ctx.input["arguments"].get("url", ""))
    if not url.startswith(("http://", "https://")):
        return _answer(ctx, f"error: not an http(s) URL: {url!r}")
    request = urllib.request.Request(url, headers={"User-Agent": "hayata-openai-agent"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            charset = response.headers.get_content_charset() or "utf-8"
            text = response.read(PAGE_LIMIT * 4).decode(charset, "replace")
    except urllib.error.HTTPError as exc:
        if exc.code == 429 or exc.code >= 500:
            raise ToolUnavailable(f"{url}: HTTP {exc.code}") from exc
        return _answer(ctx, f"error: HTTP {exc.code} from {url}")
    except (urllib.error.URLError, TimeoutError) as exc:
        raise ToolUnavailable(f"{url}: {exc}") from exc
    return _answer(ctx, text[:PAGE_LIMIT])


def send_email(ctx: hy.NodeContext) -> dict[str, Any]:
    """Send the email: here, append it to the outbox file, idempotency key included
    (a mail API would take the key, so a repeated call is recognised)."""
    email = {k: str(ctx.input["arguments"].get(k, "")) for k in ("to", "subject", "body")}
    with open(ctx.input["outbox"], "a") as f:
        f.write(json.dumps({**email, "key": ctx.idempotency_key}) + "\n")
    return _answer(ctx, f"sent to {email['to']}")


def skip_tool(ctx: hy.NodeContext) -> dict[str, Any]:
    """Answer a tool call without running it (refused, unknown tool, bad arguments)."""
    return _answer(ctx, ctx.input["content"])


def _answer(ctx: hy.NodeContext, content: str) -> dict[str, Any]:
    """The transcript with the tool's answer to the call ``ctx.input["call_id"]``."""
    return {"messages": [*ctx.state["messages"], {
        "role": "tool", "tool_call_id": ctx.input["call_id"], "content": content}]}


def _unanswered(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first tool call of the last assistant message without a tool answer."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return None
    answered = {m["tool_call_id"] for m in messages[last:] if m["role"] == "tool"}
    return next((c for c in messages[last].get("tool_calls") or []
                 if c["id"] not in answered), None)


def policy(ctx: hy.PolicyContext) -> hy.Next | hy.Finish | hy.Pause:
    """The model, then each tool it asks for (pausing before those that need a
    person's approval), then the model again, until it answers without tools."""
    messages: list[dict[str, Any]] = list(ctx.state["messages"])
    if not messages:
        return hy.Next("model", ctx.input)
    call = _unanswered(messages)
    if call is None:
        if messages[-1]["role"] == "assistant":
            return hy.Finish({"answer": messages[-1]["content"], "steps": ctx.step})
        return hy.Next("model", ctx.input)  # every call answered: the model's turn
    name = call["function"]["name"]
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
    except json.JSONDecodeError:
        arguments = None
    skip = {"call_id": call["id"]}
    if name not in TOOLS or not isinstance(arguments, dict):
        return hy.Next("skip_tool", {**skip, "content": f"error: no tool {name!r} taking "
                                     f"{call['function']['arguments']!r}"})
    if name in NEEDS_APPROVAL:
        if ctx.resume_value is None:
            return hy.Pause({"approve_tool_call": {"id": call["id"], "name": name,
                                                   "arguments": arguments}})
        if not ctx.resume_value.get("approve"):
            why = ctx.resume_value.get("why") or "no reason given"
            return hy.Next("skip_tool", {**skip, "content": f"refused by the user: {why}"})
    return hy.Next(name, {**skip, "arguments": arguments, "outbox": ctx.input.get("outbox")})


def config(agent_id: str = "openai-agent") -> hy.AgentConfig:
    transient = ("openai:RateLimitError", "openai:APIConnectionError",
                 "openai:InternalServerError")
    return hy.AgentConfig(
        id=agent_id,
        nodes={name: f"examples.openai_agent:{name}"
               for name in ("model", "fetch_page", "send_email", "skip_tool")},
        decision_policy="examples.openai_agent:policy",
        state={"messages": []},
        max_steps=24,
        node_timeouts={"model": REQUEST_TIMEOUT + 30, "fetch_page": 30},
        retry={"model": hy.RetryPolicy(max_attempts=5, initial_interval=1.0,
                                       max_interval=30.0, retry_on=transient),
               # By path, not the class: run as a script, this module's class is
               # __main__.ToolUnavailable, not the one the edge's import raises.
               "fetch_page": hy.RetryPolicy(
                   max_attempts=3, initial_interval=0.5,
                   retry_on=("examples.openai_agent:ToolUnavailable",))},
    )


def _show(message: hy.AgentEvent | hy.AgentResult, in_text: bool) -> bool:
    """Print tokens as they come, other events one a line; True while in a line of tokens."""
    if isinstance(message, hy.AgentEvent) and message.type == "node_partial_result":
        print(message.data["result"]["token"], end="", flush=True)
        return True
    if in_text:
        print()
    if isinstance(message, hy.AgentEvent):
        print(f"[{message.type}]", message.data.get("node_id", ""), flush=True)
    return False


def main() -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("set OPENAI_API_KEY (any value for a local server) and OPENAI_BASE_URL")
    question = " ".join(sys.argv[1:]) or (
        "Read https://example.com and email a one-line summary to me@example.com.")
    with tempfile.TemporaryDirectory() as tmp:
        outbox = Path(tmp) / "outbox.jsonl"
        with hy.AgentSystem(Path(tmp) / "data") as system:
            agent = system.start_agent(config())
            inv = agent.run({"question": question, "outbox": str(outbox)},
                            subscriber=hy.CALLER, stream=True)
            while True:
                in_text = False
                for message in agent.messages(inv, timeout=600):
                    in_text = _show(message, in_text)
                result = message  # the last message is the AgentResult
                assert isinstance(result, hy.AgentResult)
                if result.status != "paused" or result.error is None:
                    break
                call = result.error.details["payload"]["approve_tool_call"]
                print(f"The model wants to call {call['name']}({call['arguments']})")
                try:
                    approve = input("approve? [y/N] ").strip().lower() == "y"
                except EOFError:
                    approve = False
                if not sys.stdin.isatty():
                    print()  # the answer was not echoed
                agent.resume(inv, {"approve": approve, "why": "the user said no"},
                             subscriber=hy.CALLER, stream=True)
            print("result:", result)
            if outbox.exists():
                print("outbox:", outbox.read_text().strip())
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
