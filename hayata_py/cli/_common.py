"""What every command shares: exit codes, one-line errors, ``--data-dir``, connecting.

Exit codes: 0 success; 1 the invocation failed (its error code is printed) or
another runtime error; 2 a usage mistake (bad option, bad JSON, bad
MODULE:ATTR); 3 no system is running; 4 unknown agent or invocation; 5 the
invocation is still running (or unfinished, e.g. interrupted by a host's
death and waiting for ``hayata recover``); 6 recovery refused because tasks
are uncertain (resolve, abandon or re-run them as idempotent); 130 detached
with Ctrl-C.

What the commands share with the observer page lives below both:
:mod:`hayata_py._datadir` (``system.json``), :mod:`hayata_py._attach`
(connecting) and :mod:`hayata_py._present` (the JSON they print).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from hayata_py import _attach, _datadir
from hayata_py._api import AgentSystem
from hayata_py._codec import check_encodable
from hayata_py._datadir import DATA_DIR_ENV, DEFAULT_DATA_DIR, SystemRecord
from hayata_py._errors import EncodingError, HayataError
from hayata_py.store import TaskStore

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_SYSTEM = 3
EXIT_NOT_FOUND = 4
EXIT_RUNNING = 5
EXIT_UNCERTAIN = 6
EXIT_DETACHED = 130

F = TypeVar("F", bound=Callable[..., Any])

_CODE_EXITS = {"agent_not_found": EXIT_NOT_FOUND, "not_found": EXIT_NOT_FOUND,
               "task_not_found": EXIT_NOT_FOUND, "no_system": EXIT_NO_SYSTEM,
               "recovery_required": EXIT_RUNNING}


class CliError(click.ClickException):
    """A user-facing failure: printed as one ``Error: ...`` line, exit ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(" ".join(message.split()))
        self.code = exit_code

    # click declares ``exit_code`` a class variable; it reads it from the instance.
    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return self.code


def from_hayata(exc: HayataError) -> CliError:
    """A :class:`CliError` for a runtime error, keeping its stable code visible."""
    return CliError(f"{exc.message} [{exc.code}]", _CODE_EXITS.get(exc.code, EXIT_FAILED))


def data_dir_option(command: F) -> F:
    """Add ``--data-dir`` (default ``hayata-data`` or ``$HAYATA_DATA_DIR``) as a Path."""
    return click.option(
        "--data-dir", type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_DATA_DIR, envvar=DATA_DIR_ENV, show_default=True,
        help="Directory holding the system's system.json, logs and store.",
    )(command)


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True,
                        help="Print JSON (one object per line) instead of text.")(command)


def running_record(data_dir: Path) -> SystemRecord:
    """The record of the live system under ``data_dir``; a one-line error otherwise."""
    with _no_system():
        return _datadir.running_record(data_dir)


def connect(data_dir: Path, *, with_store: bool = False) -> tuple[AgentSystem, SystemRecord]:
    """Attach to the live system under ``data_dir`` (:func:`hayata_py._attach.connect`);
    a one-line error (exit 3) if none runs there or it cannot be reached."""
    with _no_system():
        return _attach.connect(data_dir, with_store=with_store)


@contextlib.contextmanager
def _no_system() -> Iterator[None]:
    """``HayataError(code="no_system")`` as the one-line error ``Error: <message>``,
    exit 3 (without the ``[no_system]`` that other runtime errors show)."""
    try:
        yield
    except HayataError as exc:
        if exc.code != "no_system":
            raise
        raise CliError(exc.message, EXIT_NO_SYSTEM) from exc.__cause__


def open_store_of(store_url: str | None) -> TaskStore:
    """Open the store a system recorded (for reads while its agent is not started)."""
    if not store_url:
        raise CliError("the system recorded no store URL; restart it with `hayata system "
                       "start`", EXIT_FAILED)
    from hayata_py.store import open_store

    return open_store(store_url)


def parse_json(text: str, option: str) -> Any:
    """The value of a JSON option, checked to be storable (it is recorded durably):
    a usage error naming ``option`` otherwise."""
    example = f"e.g. {option} '{{\"q\": 1}}'"
    try:
        value = json.loads(text)
    except RecursionError:
        raise CliError(f"{option} is nested too deeply to read; {example}", EXIT_USAGE
                       ) from None
    except ValueError as exc:
        raise CliError(f"{option} is not valid JSON ({exc}); {example}", EXIT_USAGE) from exc
    try:
        check_encodable(value, option.lstrip("-"))
    except EncodingError as exc:
        raise CliError(f"{option} cannot be stored durably: {exc.message}", EXIT_USAGE) from exc
    return value

