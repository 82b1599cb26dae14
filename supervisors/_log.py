"""structlog setup shared by every actor process of a system.

Actor processes are forked from the admin, so configuration travels through
the environment: ``SUPERVISORS_LOG_FILE`` (JSON lines, appended) and
``SUPERVISORS_LOG_LEVEL`` (default ``info`` with a file, ``warning`` without).
Every line carries the OS ``pid``.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

LOG_FILE_ENV = "SUPERVISORS_LOG_FILE"
LOG_LEVEL_ENV = "SUPERVISORS_LOG_LEVEL"

_configured_pid: int | None = None
_stream: TextIO | None = None


def _add_pid(
    _logger: Any, _name: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    event.setdefault("pid", os.getpid())
    return event


def configure_from_env(force: bool = False) -> None:
    """Configure structlog for this process from the environment (once per pid)."""
    global _configured_pid, _stream
    if _configured_pid == os.getpid() and not force:
        return
    _configured_pid = os.getpid()
    path = os.environ.get(LOG_FILE_ENV)
    level_name = os.environ.get(LOG_LEVEL_ENV, "info" if path else "warning")
    level = logging.getLevelNamesMapping().get(level_name.upper(), logging.INFO)
    if path:
        _stream = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        renderer: Any = structlog.processors.JSONRenderer()
    else:
        _stream = sys.stderr
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _add_pid,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(file=_stream),
        cache_logger_on_first_use=False,
    )


def get_logger(**bound: Any) -> Any:
    """A structlog logger bound with ``bound`` (configured for this process)."""
    configure_from_env()
    return structlog.get_logger("supervisors").bind(**bound)


class ThespianHandler(logging.Handler):
    """Thespian's own log records (``logDefs``, see ``_thespian.system_config.log_defs``) as
    ``thespian_log`` lines of this system's log, not raw text on the terminal
    of whoever started the system.

    It runs in the system's Thespian logger process, which gets the records of
    every actor process (and, on a convention leader, the warnings of its
    members). A line carries the logging ``level``, Thespian's ``logger`` name,
    the ``message``, the ``pid`` of the process that logged it, and the
    ``traceback`` if the record has one.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name, "message": record.getMessage()}
            if record.process is not None:
                fields["pid"] = record.process
            if record.exc_info:
                fields["traceback"] = "".join(traceback.format_exception(*record.exc_info))
            elif record.exc_text:
                fields["traceback"] = record.exc_text
            get_logger().log(record.levelno, "thespian_log", **fields)
        except Exception:  # noqa: BLE001 - logging must not fail the logger process
            self.handleError(record)
