"""``hayata observe`` from a shell: its bad options are one-line errors with exit codes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hayata_py import AgentSystem, ConfigError, HayataError
from hayata_py._observer import observe
from tests.cli.test_cli import assert_one_line_error, hayata, ok, record
from tests.observer_util import Client

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize(("args", "words"), [
    (("--port", "70000"), ("--port", "70000")),
    (("--port", "eighty"), ("--port", "eighty")),
    (("--bind", "localhost:80"), ("--bind must be an IP address",)),
])
def test_invalid_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...],
                                          words: tuple[str, ...]) -> None:
    done = hayata(tmp_path / "data", "observe", *args)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def test_without_a_system_it_says_how_to_start_one(tmp_path: Path) -> None:
    done = hayata(tmp_path / "data", "observe")
    assert_one_line_error(done, "no hayata system is running", "hayata system start")
    assert done.returncode == 3


def test_observe_by_data_dir_without_a_system(tmp_path: Path) -> None:
    with pytest.raises(HayataError, match="no hayata system is running") as info:
        observe(tmp_path / "data", port=0)
    assert info.value.code == "no_system"
    with pytest.raises(ConfigError, match="port"):
        observe(tmp_path / "data", port=-1)


def test_a_port_in_use_or_an_address_not_of_this_host(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    # Attaching by data dir sets these (as the CLI does): keep them to this test.
    monkeypatch.setenv("SUPERVISORS_LOG_FILE", str(tmp_path / "attached.log.jsonl"))
    monkeypatch.setenv("SUPERVISORS_BIND", "127.0.0.1")
    taken = socket.socket()
    try:
        ok(data_dir, "system", "start")
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = hayata(data_dir, "observe", "--port", str(port))
        assert_one_line_error(done, f"--port {port} is already in use", "0 for a free one")
        assert done.returncode == 2
        # 192.0.2.1 is a documentation address: on no host's interfaces.
        done = hayata(data_dir, "observe", "--port", "0", "--bind", "192.0.2.1")
        assert_one_line_error(done, "--bind", "cannot listen on 192.0.2.1")
        assert done.returncode == 2

        # From Python, by data dir: the same errors, then the page of that system.
        with pytest.raises(ConfigError, match="already in use") as info:
            observe(data_dir, port=port)
        assert info.value.details["field"] == "port"
        with observe(data_dir, port=0) as observer:
            client = Client(observer.url)
            assert client.request("GET", "/api/ping") == (200, {"ok": True})
            stream = client.messages()
            try:
                state = next(stream)
            finally:
                stream.close()
            assert state["system"]["admin_port"] == record(data_dir)["admin_port"]
            assert state["alive"] and state["tree"]["children"] == []
    finally:
        taken.close()
        hayata(data_dir, "system", "kill")


def test_agent_system_observe_serves_its_own_page(agents: AgentSystem) -> None:
    """``AgentSystem.observe`` serves the same page for a system started in
    Python, and refuses a bad port naming the field."""
    with pytest.raises(ConfigError) as info:
        agents.observe(port=-1)
    assert info.value.details["field"] == "port"
    with agents.observe(port=0) as observer:
        client = Client(observer.url)
        assert client.request("GET", "/api/ping") == (200, {"ok": True})
        stream = client.messages()
        try:
            state = next(stream)
        finally:
            stream.close()
        assert state["system"]["admin_port"] == agents.admin_port
