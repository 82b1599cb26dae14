"""How ``hayata run``/``recover``/``resume`` report the system dying while they
follow an invocation: one message, whichever check notices it first."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from hayata_py import _datadir
from hayata_py._errors import ErrorInfo, HayataError
from hayata_py._ref_checks import system_died as api_system_died
from hayata_py.cli._common import EXIT_NO_SYSTEM, EXIT_RUNNING, CliError
from hayata_py.cli.run import follow
from hayata_py.messages import AgentResult

pytestmark = pytest.mark.timeout(30)

RECORD = _datadir.SystemRecord(
    data_dir="d", admin_port=1, admin_pid=4242, admin_started=0.0, session_id=1,
    store_url=None, log_file="l", output_file="o", cwd=".", started_at=0.0)


class SilentRef:
    """An agent handle whose stream stays silent and whose ``wait`` raises ``error``."""

    id = "drill"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def messages(self, invocation_id: str, timeout: float) -> Any:
        raise TimeoutError(f"nothing for {invocation_id} in {timeout}s")

    def wait(self, invocation_id: str, timeout: float) -> Any:
        raise self.error


def died(monkeypatch: pytest.MonkeyPatch, admin_seen_alive: bool, wait_error: BaseException,
         tmp_path: Path) -> CliError:
    monkeypatch.setattr(_datadir, "alive", lambda record: admin_seen_alive)
    with pytest.raises(CliError) as err:
        follow(SilentRef(wait_error), "inv-1", False, None, tmp_path, RECORD)
    return err.value


def test_both_ways_of_noticing_the_system_died_give_one_message(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The poll timed out and the admin is gone already...
    polled = died(monkeypatch, False, TimeoutError(), tmp_path)
    # ...or it still looked alive then, and the API's wait found it gone.
    system = types.SimpleNamespace(admin_pid=RECORD.admin_pid)
    waited = died(monkeypatch, True, api_system_died(system, "inv-1"), tmp_path)
    assert polled.exit_code == waited.exit_code == EXIT_NO_SYSTEM
    assert polled.message == waited.message
    assert polled.message.startswith("the system died during invocation inv-1 (admin pid 4242")
    assert f"hayata recover drill --data-dir {tmp_path}" in polled.message


def test_other_runtime_errors_are_not_taken_for_the_system_dying(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_datadir, "alive", lambda record: True)
    with pytest.raises(HayataError) as err:
        follow(SilentRef(HayataError("boom", code="protocol_error")), "inv-1", False, None,
               tmp_path, RECORD)
    assert err.value.code == "protocol_error"


class EndedRef(SilentRef):
    """An agent handle whose stream ends with ``result`` (an end filed from the
    store's log when the agent process is gone)."""

    def __init__(self, result: AgentResult) -> None:
        super().__init__(TimeoutError())
        self.result = result

    def messages(self, invocation_id: str, timeout: float) -> Any:
        return iter([self.result])


def test_an_interrupted_end_from_the_log_of_a_dead_system_is_the_system_dying(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    interrupted = AgentResult("inv-1", False, error=ErrorInfo(
        "invocation_interrupted", "its agent process is gone", {"recoverable": True}),
        status="interrupted")
    # the third way of noticing: the stream ended from the log, and the admin is gone
    filed = died_with(monkeypatch, EndedRef(interrupted), admin_alive=False, tmp_path=tmp_path)
    polled = died(monkeypatch, False, TimeoutError(), tmp_path)
    assert isinstance(filed, CliError) and filed.exit_code == EXIT_NO_SYSTEM
    assert filed.message == polled.message
    # with the system up (only the agent died), it is the run's result: exit 5
    assert died_with(monkeypatch, EndedRef(interrupted), admin_alive=True,
                     tmp_path=tmp_path) == EXIT_RUNNING


def died_with(monkeypatch: pytest.MonkeyPatch, ref: Any, *, admin_alive: bool,
              tmp_path: Path) -> CliError | int:
    monkeypatch.setattr(_datadir, "alive", lambda record: admin_alive)
    try:
        return follow(ref, "inv-1", True, None, tmp_path, RECORD)
    except CliError as exc:
        return exc


def test_both_ways_of_noticing_the_agent_died_name_the_way_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Only the agent died (the system is up): its interrupted end reached the
    stream, or the stream stayed silent and the wait said so. Either way the
    run exits 5 naming `hayata recover AGENT`."""
    monkeypatch.setattr(_datadir, "alive", lambda record: True)
    interrupted = AgentResult("inv-1", False, error=ErrorInfo(
        "invocation_interrupted", "its agent process is gone", {"recoverable": True}),
        status="interrupted")
    assert follow(EndedRef(interrupted), "inv-1", False, None, tmp_path,
                  RECORD) == EXIT_RUNNING
    way_on = f"hayata recover drill --data-dir {tmp_path}"
    assert way_on in capsys.readouterr().err
    with pytest.raises(CliError) as waited:
        follow(SilentRef(HayataError("gone", code="recovery_required")), "inv-1", False, None,
               tmp_path, RECORD)
    assert waited.value.exit_code == EXIT_RUNNING and way_on in waited.value.message
