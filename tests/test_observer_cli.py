"""``hayata observe`` from a shell: its bad options are one-line errors with exit codes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.test_cli import assert_one_line_error, hayata, ok

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


def test_a_port_in_use_or_an_address_not_of_this_host(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
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
    finally:
        taken.close()
        hayata(data_dir, "system", "kill")
