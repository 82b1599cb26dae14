"""Bad input, systematically: CLI arguments, JSON inputs and ``system.json``.

Through click's CliRunner, with no system running (the launcher of
``system start`` is replaced by one that records what it was asked to
start): every argument is accepted, or refused with exit status 2 and one
``Error:`` line naming the option, never a traceback.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hayata_py.cli import _launch, cli
from hayata_py.cli._common import EXIT_NO_SYSTEM, EXIT_USAGE
from tests.bad_input import FAST, deep

CLI_EXAMPLES = settings(FAST, max_examples=60, suppress_health_check=[
    *FAST.suppress_health_check, HealthCheck.function_scoped_fixture])
"""The fixtures (a temporary data dir, a patched launcher) hold for every example."""


class Launched(Exception):
    """``system start`` got as far as launching: its options were accepted."""


def invoke(*args: str, data_dir: Path) -> Result:
    result = CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir)],
                                catch_exceptions=True)
    assert isinstance(result.exception, (SystemExit, Launched)) or result.exception is None, (
        f"hayata {' '.join(args)[:200]} crashed: {result.exception!r:.300}\n"
        f"{result.output[:500]}")
    return result


def error_line(result: Result) -> str:
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


json_texts = st.one_of(
    st.text(max_size=20),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                           st.text(max_size=5)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3),
                                         st.dictionaries(st.text(max_size=4), inner,
                                                         max_size=3)),
                 max_leaves=8).map(json.dumps),
    st.integers(min_value=2**64, max_value=2**80).map(lambda n: f'{{"n": {n}}}'),
    st.sampled_from(["[" * 100_000, '{"a":' * 50_000, "1" * 5000, "NaN", "-Infinity",
                     '{"a": 1, "a": 2}', "\ud800", '"\\ud800"']),
)


def _storable(text: str) -> bool:
    from hayata_py._codec import check_encodable
    from hayata_py._errors import EncodingError

    try:
        check_encodable(json.loads(text), "input")
    except (ValueError, RecursionError, EncodingError):
        return False
    return True


@CLI_EXAMPLES
@given(text=json_texts)
def test_run_input_is_refused_before_looking_for_a_system(tmp_path: Path, text: str) -> None:
    result = invoke("run", "a", "--input", text, data_dir=tmp_path)
    if _storable(text):
        assert result.exit_code == EXIT_NO_SYSTEM, result.output
    else:
        assert result.exit_code == EXIT_USAGE, result.output
        assert error_line(result).startswith("Error: --input ")


@CLI_EXAMPLES
@given(text=json_texts)
def test_resolve_result_is_refused_before_looking_for_a_system(
        tmp_path: Path, text: str) -> None:
    result = invoke("resolve", "a", "task-1", "--result", text, data_dir=tmp_path)
    if _storable(text) and isinstance(json.loads(text), dict):
        assert result.exit_code == EXIT_NO_SYSTEM, result.output
    else:
        assert result.exit_code == EXIT_USAGE, result.output
        assert error_line(result).startswith("Error: --result ")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        # Regressions: a traceback (RecursionError), or "no system is running"
        # for an input that could never be run.
        ("[" * 100_000, "nested too deeply"),
        ('{"n": 18446744073709551616}', "input.n"),
        ("[" * 300 + "]" * 300, "nesting deeper"),
    ],
)
def test_run_input_regressions(tmp_path: Path, text: str, why: str) -> None:
    result = invoke("run", "a", "--input", text, data_dir=tmp_path)
    assert result.exit_code == EXIT_USAGE
    assert why in error_line(result)


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    launched: list[dict[str, Any]] = []

    def launch(data_dir: Path, admin_port: Any, telemetry_log: bool, **options: Any) -> None:
        launched.append({"admin_port": admin_port, **options})
        raise Launched

    monkeypatch.setattr(_launch, "launch", launch)
    return launched


OPTIONS = ["--admin-port", "--store", "--name", "--bind", "--leader", "--capability",
           "--heartbeat", "--heartbeat-misses", "--convention-period", "--convention-misses"]
option_values = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["0", "-1", "65536", "1.5", "nan", "inf", "-inf", "1e309", "²", "٣",
                     "0x10", "1_000", "", " ", "127.0.0.1", "0.0.0.0", "::1", "host:",
                     ":1900", "h:²", "h:٣٣", "h:99999", "gpu=true", "gpu", "=x", "gpu=[1]",
                     "gpu=NaN", "gpu=Infinity", "gpu=null", "gpu=" + "[" * 10_000,
                     "sqlite:///x.db", "mysql://h/db", "postgresql://", "::"]),
)


@CLI_EXAMPLES
@given(option=st.sampled_from(OPTIONS), value=option_values)
def test_system_start_options_are_accepted_or_refused_naming_the_option(
        tmp_path: Path, no_launch: list[dict[str, Any]], option: str, value: str) -> None:
    before = len(no_launch)
    result = invoke("system", "start", f"{option}={value}" if value.startswith("-") else option,
                    *([] if value.startswith("-") else [value]), data_dir=tmp_path / "d")
    if isinstance(result.exception, SystemExit):
        assert result.exit_code == EXIT_USAGE, result.output
        assert len(no_launch) == before
        assert option in error_line(result), result.output
        return
    assert isinstance(result.exception, Launched) and len(no_launch) == before + 1
    _check_launched(no_launch[-1])


def _check_launched(options: dict[str, Any]) -> None:
    """What reached the launcher is what the system needs."""
    port = options["admin_port"]
    assert port is None or (isinstance(port, int) and 0 < port < 65536)
    assert options["name"] is None or options["name"].strip()
    leader = options["convention_leader"]
    assert leader is None or (isinstance(leader[1], int) and 0 < leader[1] < 65536)
    for value in options["capabilities"].values():
        assert isinstance(value, (str, int, float, bool))
        assert not isinstance(value, float) or math.isfinite(value)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        # Regressions: each raised a traceback or reached the launcher.
        (["--leader", "h:²"], "--leader"),
        (["--capability", "gpu=NaN"], "--capability"),
        (["--capability", "mem=Infinity"], "--capability"),
    ],
)
def test_system_start_regressions(tmp_path: Path, no_launch: list[dict[str, Any]],
                                  args: list[str], option: str) -> None:
    result = invoke("system", "start", *args, data_dir=tmp_path)
    assert result.exit_code == EXIT_USAGE, result.output
    assert error_line(result).startswith(f"Error: {option}")
    assert no_launch == []


def test_capability_too_deep_for_json_is_a_string(
        tmp_path: Path, no_launch: list[dict[str, Any]]) -> None:
    """Regression: RecursionError from json.loads; VALUE that is not JSON is a string."""
    result = invoke("system", "start", "--capability", "k=" + "[" * 10_000, data_dir=tmp_path)
    assert isinstance(result.exception, Launched)
    assert no_launch[0]["capabilities"] == {"k": "[" * 10_000}


record_fields = {
    "data_dir": st.text(max_size=5), "admin_port": st.integers(), "admin_pid": st.integers(),
    "admin_started": st.floats(), "session_id": st.integers(), "store_url": st.text(max_size=5),
    "log_file": st.text(max_size=5), "output_file": st.text(max_size=5),
    "cwd": st.text(max_size=5), "started_at": st.floats(), "liveness": st.just({}),
    "server_pid": st.one_of(st.none(), st.integers(), st.booleans()),
}
json_any = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                  st.text(max_size=4)),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3)), max_leaves=6)
records = st.one_of(
    json_any,
    st.fixed_dictionaries({k: st.one_of(v, json_any) for k, v in record_fields.items()}),
)


@CLI_EXAMPLES
@given(record=records)
def test_a_garbage_system_json_means_no_system(tmp_path: Path, record: Any) -> None:
    """Read-only commands find no running system in a garbage record (exit 3), and
    never crash on its field types."""
    (tmp_path / "system.json").write_text(json.dumps(record))
    for args in (["system", "status"], ["agent", "list"], ["run", "a"]):
        result = invoke(*args, data_dir=tmp_path)
        assert result.exit_code == EXIT_NO_SYSTEM, (args, result.output)
        error_line(result)


def test_system_json_regression_wrong_types(tmp_path: Path) -> None:
    """Regression: ``admin_pid: "x"`` raised TypeError from psutil, a record naming
    this process's own session was taken for the system's."""
    import os

    base = {"data_dir": str(tmp_path), "admin_port": 1900, "admin_pid": os.getpid(),
            "admin_started": 0.0, "session_id": os.getsid(0), "store_url": None,
            "log_file": "l", "output_file": "o", "cwd": ".", "started_at": 0.0}
    for change in ({"admin_pid": "x"}, {"admin_started": "y"}, {"session_id": [1]}, {}):
        (tmp_path / "system.json").write_text(json.dumps(base | change))
        result = invoke("system", "status", data_dir=tmp_path)
        assert result.exit_code == EXIT_NO_SYSTEM, result.output
    from hayata_py import _datadir

    assert _datadir.load(tmp_path) is None  # our own session is never a system's


def test_a_records_server_pid_must_be_a_pid(tmp_path: Path) -> None:
    """``server_pid`` (a ``hayata serve``'s system) is None or a pid > 1: any
    other value makes the record no record, so no command trusts it."""
    from hayata_py import _datadir

    base = {"data_dir": str(tmp_path), "admin_port": 1900, "admin_pid": 4242,
            "admin_started": 0.0, "session_id": 4242, "store_url": None,
            "log_file": "l", "output_file": "o", "cwd": ".", "started_at": 0.0}
    for server_pid, kept in ((None, True), (4243, True), (True, False), (1, False),
                             (-5, False), ("4243", False)):
        (tmp_path / "system.json").write_text(json.dumps(base | {"server_pid": server_pid}))
        loaded = _datadir.load(tmp_path)
        assert (loaded is not None) == kept, server_pid
        if loaded is not None:
            assert loaded.server_pid == server_pid


def test_deep_json_is_a_usage_error_not_a_crash() -> None:
    from hayata_py.cli._common import CliError, parse_json

    with pytest.raises(CliError) as err:
        parse_json(json.dumps(deep(10)).replace("0", "[" * 100_000), "--input")
    assert err.value.exit_code == EXIT_USAGE
