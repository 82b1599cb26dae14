"""The boundary check of a run request (pure): a bad :class:`Run` is refused with
a :class:`RunRejected` naming the field, before anything is recorded."""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorAddress

from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, RunRejected
from hayata_py.messages import Caller, Run


def validate_run(run: Any) -> RunRejected | None:
    """The boundary check of a :class:`Run` message (pure)."""
    if not isinstance(run, Run):
        return RunRejected(f"expected hy.Run, got {type(run).__name__}", code="invalid_option",
                           field="run")
    stream: Any = run.stream
    if not isinstance(stream, bool):
        return RunRejected(f"stream must be True or False, got {stream!r}",
                           code="invalid_option", field="stream")
    if run.subscriber is not None and not isinstance(run.subscriber, (Caller, ActorAddress)):
        return RunRejected(
            f"subscriber must be an actor address or hy.CALLER, got "
            f"{type(run.subscriber).__name__}", code="invalid_option", field="subscriber")
    if run.stream and run.subscriber is None:
        return RunRejected("stream=True needs a subscriber (an actor address or hy.CALLER)",
                           code="invalid_option", field="subscriber")
    try:
        check_encodable(run.input, "input")
    except EncodingError as exc:
        return RunRejected(f"input cannot be stored durably: {exc}", code="invalid_input",
                           field="input", key=exc.details.get("key"))
    return None
