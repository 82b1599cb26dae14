"""How ``hayata run``/``recover``/``resume`` report the system dying while they
follow an invocation: one message, whichever check notices it first."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from hayata_py import _datadir
from hayata_py._errors import HayataError
from hayata_py._ref_checks import system_died as api_system_died
from hayata_py.cli._common import EXIT_NO_SYSTEM, CliError
from hayata_py.cli.run import follow

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
