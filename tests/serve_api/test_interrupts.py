"""A node that calls ``interrupt()``, and its resume with ``command``."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.serve_api.support import ASK, STEPS, of

pytestmark = pytest.mark.timeout(60)

QUESTION = {"question": "proceed?"}


def ask(client: SyncLangGraphClient, thread_id: str) -> list[object]:
    """Stream a run of ``ask`` up to its interrupt; answers the values payloads."""
    parts = list(client.runs.stream(thread_id, ASK, input=QUESTION, stream_mode="values"))
    run_id = parts[0].data["run_id"]
    assert client.runs.get(thread_id, run_id)["status"] == "success"
    return of(parts, "values")


def test_interrupt_is_in_the_last_values_event(client: SyncLangGraphClient, thread_id: str) -> None:
    """The interrupt arrives as ``__interrupt__: [{value, id}]`` in the last ``values`` event."""
    values = ask(client, thread_id)
    last = values[-1]
    assert isinstance(last, dict)
    assert last["question"] == "proceed?"
    [pending] = last["__interrupt__"]
    assert pending["value"] == QUESTION
    assert isinstance(pending["id"], str) and pending["id"]
    assert all("__interrupt__" not in v for v in values[:-1] if isinstance(v, dict))


def test_interrupted_run_ends_success_thread_interrupted(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """A run stopped at ``interrupt()`` ends ``success``; its thread is ``interrupted``."""
    ask(client, thread_id)
    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    assert [i["value"] for found in thread["interrupts"].values() for i in found] == [QUESTION]


def test_interrupted_state_names_the_waiting_task(
    client: SyncLangGraphClient, thread_id: str
) -> None:
    """The thread's state has the interrupted node next, its task carrying the interrupt."""
    ask(client, thread_id)
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["ask"]
    [task] = state["tasks"]
    assert task["name"] == "ask"
    assert [i["value"] for i in task["interrupts"]] == [QUESTION]
    assert [i["value"] for i in state["interrupts"]] == [QUESTION]


def test_updates_mode_shows_the_interrupt(client: SyncLangGraphClient, thread_id: str) -> None:
    """In ``updates`` mode the interrupt is an update ``{"__interrupt__": [...]}``."""
    parts = list(client.runs.stream(thread_id, ASK, input=QUESTION, stream_mode="updates"))
    [interrupt_update] = [u for u in of(parts, "updates")
                          if isinstance(u, dict) and "__interrupt__" in u]
    assert [i["value"] for i in interrupt_update["__interrupt__"]] == [QUESTION]


def test_command_resume_finishes_the_run(client: SyncLangGraphClient, thread_id: str) -> None:
    """``command: {resume: v}`` resumes the node with ``v``: run ``success``, thread ``idle``."""
    ask(client, thread_id)
    parts = list(client.runs.stream(thread_id, ASK, command={"resume": "yes"},
                                    stream_mode="values"))
    assert of(parts, "values")[-1] == {"question": "proceed?", "answer": "yes", "done": True}
    assert client.runs.get(thread_id, parts[0].data["run_id"])["status"] == "success"
    assert client.threads.get(thread_id)["status"] == "idle"


def test_wait_answers_the_interrupt(client: SyncLangGraphClient, thread_id: str) -> None:
    """``runs.wait`` on a run that interrupts answers the values with ``__interrupt__``."""
    values = client.runs.wait(thread_id, ASK, input=QUESTION)
    assert isinstance(values, dict)
    assert [i["value"] for i in values["__interrupt__"]] == [QUESTION]


def test_interrupt_before_a_node(client: SyncLangGraphClient, thread_id: str) -> None:
    """``interrupt_before``: the run ends ``success`` before the node; ``input=None`` goes on."""
    parts = list(client.runs.stream(thread_id, STEPS, input={"label": "i"},
                                    interrupt_before=["middle"], stream_mode="values"))
    assert of(parts, "values")[-1] == {"label": "i", "steps": ["i:first"]}
    assert client.runs.get(thread_id, parts[0].data["run_id"])["status"] == "success"
    assert client.threads.get(thread_id)["status"] == "interrupted"
    assert client.threads.get_state(thread_id)["next"] == ["middle"]
    values = client.runs.wait(thread_id, STEPS, input=None)
    assert values == {"label": "i", "steps": ["i:first", "i:middle", "i:last"]}


def test_interrupt_after_a_node(client: SyncLangGraphClient, thread_id: str) -> None:
    """``interrupt_after``: the run stops right after that node; the next node is the one after."""
    client.runs.wait(thread_id, STEPS, input={"label": "i"}, interrupt_after=["middle"])
    state = client.threads.get_state(thread_id)
    assert state["values"]["steps"] == ["i:first", "i:middle"]
    assert state["next"] == ["last"]
    assert client.threads.get(thread_id)["status"] == "interrupted"
