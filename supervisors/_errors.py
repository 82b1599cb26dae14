"""Errors of the supervision library, each with a stable machine-readable code."""

from __future__ import annotations

from typing import Any


class SupervisorError(Exception):
    """Base error. ``code`` is stable: ``not_found``, ``running``, ``already_present``,
    ``invalid_spec``, ``start_failed``, ``timeout``, ``not_supported``, ``no_reply``,
    ``invalid_option`` (a bad System option), ``no_admin``, ``thespian_mismatch``."""

    code: str = "supervisor_error"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details: dict[str, Any] = details

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.message, self.code, self.details))


def _rebuild(cls: type[SupervisorError], message: str, code: str, details: dict[str, Any]) -> Any:
    err = cls.__new__(cls)
    SupervisorError.__init__(err, message, code=code, **details)
    return err


class InvalidSpec(SupervisorError, ValueError):
    """A child spec or supervisor flags field is invalid; ``details['field']`` names it."""

    code = "invalid_spec"

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(f"{field}: {message}", field=field, **details)


class StartFailed(SupervisorError):
    """A child (``details['child_id']``) could not be started; ``details['reason']`` says why."""

    code = "start_failed"


class ThespianMismatch(SupervisorError, ImportError):
    """The installed Thespian's source differs from the one a patch that
    correctness depends on was written against (``details['patches']``,
    ``details['thespian']``: the installed version, ``details['written_for']``):
    raised when ``supervisors`` is imported, before any patch is installed."""

    code = "thespian_mismatch"
