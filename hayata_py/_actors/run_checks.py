"""The boundary check of a run request (pure): a bad :class:`Run` is refused with
a :class:`RunRejected` naming the field, before anything is recorded."""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorAddress

from hayata_py._actor_messages import BatchSubscriber
from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, RunRejected
from hayata_py.messages import MAX_THREAD_ID, MULTITASK, Caller, Run

_HEX = frozenset("0123456789abcdef")


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 32 and set(value) <= _HEX


def validate_run(run: Any) -> RunRejected | None:
    """The boundary check of a :class:`Run` message (pure)."""
    if not isinstance(run, Run):
        return RunRejected(f"expected hy.Run, got {type(run).__name__}", code="invalid_option",
                           field="run")
    stream: Any = run.stream
    if not isinstance(stream, bool):
        return RunRejected(f"stream must be True or False, got {stream!r}",
                           code="invalid_option", field="stream")
    subscriber: Any = run.subscriber
    if isinstance(subscriber, BatchSubscriber):  # hayata's own CALLER receiver
        subscriber = subscriber.address
    if subscriber is not None and not isinstance(subscriber, (Caller, ActorAddress)):
        return RunRejected(
            f"subscriber must be an actor address or hy.CALLER, got "
            f"{type(subscriber).__name__}", code="invalid_option", field="subscriber")
    if run.stream and run.subscriber is None:
        return RunRejected("stream=True needs a subscriber (an actor address or hy.CALLER)",
                           code="invalid_option", field="subscriber")
    thread: Any = run.thread
    if thread is not None and (not isinstance(thread, str) or not thread.strip()
                               or len(thread) > MAX_THREAD_ID or "\x00" in thread):
        return RunRejected(f"thread must be a non-empty string of at most {MAX_THREAD_ID} "
                           f"characters (a conversation id), got {thread!r:.80}",
                           code="invalid_option", field="thread")
    if run.multitask not in MULTITASK:
        return RunRejected(f"multitask must be one of {list(MULTITASK)} (what a run on a busy "
                           f"thread does), got {run.multitask!r:.80}", code="invalid_option",
                           field="multitask")
    if run.multitask != "reject" and thread is None:
        return RunRejected("multitask applies to a run on a thread: pass thread=...",
                           code="invalid_option", field="multitask")
    wait: Any = run.wait
    if not isinstance(wait, bool):
        return RunRejected(f"wait must be True or False, got {wait!r:.80}",
                           code="invalid_option", field="wait")
    invocation_id: Any = run.invocation_id
    if invocation_id is not None and not _is_id(invocation_id):
        return RunRejected(f"invocation_id must be 32 lowercase hex digits (uuid.uuid4().hex) "
                           f"or None, got {invocation_id!r:.80}", code="invalid_option",
                           field="invocation_id")
    if wait and invocation_id is None:
        return RunRejected("wait=True needs an invocation_id chosen by the sender "
                           "(uuid.uuid4().hex), to wait for it after an agent restart",
                           code="invalid_option", field="invocation_id")
    if wait and isinstance(run.subscriber, Caller):
        return RunRejected("wait=True answers the sender with the result; to read the "
                           "events too, run with subscriber=hy.CALLER and wait=False",
                           code="invalid_option", field="subscriber")
    try:
        check_encodable(run.input, "input")
    except EncodingError as exc:
        return RunRejected(f"input cannot be stored durably: {exc}", code="invalid_input",
                           field="input", key=exc.details.get("key"))
    return None
