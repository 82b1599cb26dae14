"""What every command shares: exit codes, one-line errors, ``--data-dir``, connecting.

Exit codes: 0 success; 1 the invocation failed (its error code is printed) or
another runtime error; 2 a usage mistake (bad option, bad JSON, bad
MODULE:ATTR); 3 no system is running; 4 unknown agent or invocation; 5 the
invocation is still running (or unfinished, e.g. interrupted by a host's
death and waiting for ``hayata recover``); 6 recovery refused because tasks
are uncertain (resolve, abandon or re-run them as idempotent); 130 detached
with Ctrl-C.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hayata_py._api import AgentSystem
from hayata_py._codec import check_encodable
from hayata_py._errors import EncodingError, HayataError
from hayata_py.cli import _state
from hayata_py.store import TaskStore

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_SYSTEM = 3
EXIT_NOT_FOUND = 4
EXIT_RUNNING = 5
EXIT_UNCERTAIN = 6
EXIT_DETACHED = 130

DEFAULT_DATA_DIR = "hayata-data"
DATA_DIR_ENV = "HAYATA_DATA_DIR"
LOG_FILE_ENV = "SUPERVISORS_LOG_FILE"
BIND_ENV = "SUPERVISORS_BIND"

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


def cli_hint(data_dir: Path) -> str:
    """``--data-dir X`` for hints, empty for the default or ``$HAYATA_DATA_DIR``."""
    implied = (DEFAULT_DATA_DIR, os.environ.get(DATA_DIR_ENV))
    return "" if str(data_dir) in implied else f" --data-dir {data_dir}"


def running_record(data_dir: Path) -> _state.SystemRecord:
    """The record of the live system under ``data_dir``; a one-line error otherwise."""
    record = _state.load(data_dir)
    start = f"start one with `hayata system start{cli_hint(data_dir)}`"
    if record is None:
        raise CliError(f"no hayata system is running for data dir {data_dir} "
                       f"(no {_state.RECORD_NAME}); {start}", EXIT_NO_SYSTEM)
    if not _state.alive(record):
        raise CliError(f"the system recorded in {_state.record_path(data_dir)} is not running "
                       f"(admin pid {record.admin_pid} is gone); {start}", EXIT_NO_SYSTEM)
    return record


def connect(data_dir: Path, *, with_store: bool = False
            ) -> tuple[AgentSystem, _state.SystemRecord]:
    """Attach to the live system under ``data_dir`` (its logs go to the system's log).

    ``with_store``: also open the system's durable store (for commands that read
    it, such as ``tasks``); the others skip its cost.
    """
    record = running_record(data_dir)
    os.environ.setdefault(LOG_FILE_ENV, record.log_file)
    # Reach the admin at the address it bound (--bind), not loopback.
    os.environ[BIND_ENV] = record.bind
    store_url = record.store_url if with_store else None
    try:
        system = AgentSystem.connect(record.admin_port, store_url=store_url)
    except HayataError as exc:
        raise CliError(f"cannot reach the system on admin port {record.admin_port}: "
                       f"{exc.message}; check `hayata system status{cli_hint(data_dir)}`",
                       EXIT_NO_SYSTEM) from exc
    if system.session_id != record.session_id:
        raise CliError(f"admin port {record.admin_port} is served by another system (session "
                       f"{system.session_id}, not {record.session_id})", EXIT_NO_SYSTEM)
    # Agents started through this handle run as the recorded system instance
    # (recorded with the tasks they run; the lease owner is the system's name).
    system.instance = record.instance or system.instance
    return system, record


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

