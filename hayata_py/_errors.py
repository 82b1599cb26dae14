"""One exception hierarchy for hayata_py, each error with a stable code.

Codes are machine-readable strings that never change meaning once released
(`task_execution_uncertain`, `recovery_required`, ...). Callers branch on
``err.code``; the message is for people. An error that crosses a process
boundary travels as :class:`ErrorInfo` (a plain picklable, msgpack-able
record) and is rebuilt with :func:`error_from_info`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ErrorInfo:
    """A failure as data: a stable ``code``, a human ``message`` and details.

    ``details`` holds only plain values (str, int, float, bool, None, lists
    and dicts of them) so it can be pickled into a message and msgpack-encoded
    into the store.
    """

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ErrorInfo:
        return cls(str(data["code"]), str(data["message"]), dict(data.get("details") or {}))


class HayataError(Exception):
    """Base of every error hayata_py raises on purpose.

    ``code`` is stable and machine-readable; ``details`` carries the facts
    (field names, task ids, ...) a program needs to react.
    """

    code: str = "hayata_error"
    ref: int = 0
    """Sent as an actor's answer: the ``ref`` of the request it answers."""

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details: dict[str, Any] = details

    def info(self) -> ErrorInfo:
        return ErrorInfo(self.code, self.message, dict(self.details))

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.message, self.code, self.details, self.ref))


def _rebuild(cls: type[HayataError], message: str, code: str, details: dict[str, Any],
             ref: int = 0) -> Any:
    err = cls.__new__(cls)
    HayataError.__init__(err, message, code=code, **details)
    if ref:
        err.ref = ref
    return err


class ConfigError(HayataError, ValueError):
    """A configuration, option or message field is invalid. ``details['field']`` names it."""

    code = "invalid_config"

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(f"{field}: {message}", field=field, **details)


class AgentAlreadyStarted(HayataError):
    """An agent with this id is already running in the system."""

    code = "agent_already_started"


class AgentNotFound(HayataError):
    """No agent with this id runs in the system."""

    code = "agent_not_found"


class RunRejected(HayataError):
    """A run was refused; nothing was started and no notification is sent.

    Codes: ``agent_busy``, ``recovery_required``, ``invalid_option``,
    ``invalid_input``, and the store's codes when the invocation could not be
    recorded (e.g. ``store_unavailable``).
    """

    code = "run_rejected"


class RecoveryRejected(HayataError):
    """A recovery request was refused.

    Codes: ``nothing_to_recover``, ``task_execution_uncertain``, ...
    """

    code = "recovery_rejected"


class InvalidPartialResult(HayataError, TypeError):
    """A node's streamer was called with something other than a dict."""

    code = "invalid_partial_result"


class StaleExecution(HayataError):
    """A streamer or writer belongs to an execution that is no longer active."""

    code = "stale_execution"


class StoreError(HayataError):
    """The durable store refused or failed an operation."""

    code = "store_error"


class EncodingError(StoreError, ValueError):
    """A value cannot be encoded durably (msgpack); ``details['key']`` names where."""

    code = "unencodable_value"


class CorruptRecord(StoreError):
    """A stored value cannot be decoded; the record is named in ``details``."""

    code = "corrupt_record"


class SchemaTooNew(StoreError):
    """The database was written by a newer hayata_py schema; nothing was changed."""

    code = "schema_too_new"


class StaleWriter(StoreError):
    """A write carried a fencing token older than the current owner's: refused."""

    code = "stale_writer"


class InvocationBusy(StoreError):
    """Another owner holds an unexpired lease on this invocation (``invocation_busy``)."""

    code = "invocation_busy"


class ReadOnlyStorage(StoreError):
    """The data directory or the SQLite store cannot be written (a read-only
    filesystem): the system refuses to start (``read_only_storage``);
    ``details['path']`` names what is read-only."""

    code = "read_only_storage"


class TimeoutError_(HayataError, TimeoutError):
    """A wait ran out of time (``timeout``)."""

    code = "timeout"


def error_from_info(info: ErrorInfo) -> HayataError:
    """Rebuild an exception from an :class:`ErrorInfo`, keeping its code."""
    return HayataError(info.message, code=info.code, **info.details)
