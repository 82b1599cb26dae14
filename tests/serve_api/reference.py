"""Run the serve_api conformance suite against LangGraph's own local server.

``python -m tests.serve_api.reference [--venv DIR] [-- PYTEST ARGS]`` (what
``make test-serve-reference`` runs):

1. makes DIR a venv with ``langgraph-cli[inmem]`` and ``langgraph-sdk`` at the
   versions below if it has no ``langgraph`` command yet (its own venv: the
   project's is never touched);
2. starts ``langgraph dev`` on a free loopback port, in a fresh temporary
   directory holding a copy of ``langgraph.json`` and ``graphs.py`` (so its
   ``.langgraph_api`` pickles land there), in a process group of its own;
3. runs ``pytest tests/serve_api --server-url URL`` with this interpreter;
4. stops the server's whole process group (TERM, then KILL) and removes the
   directory, whatever happened; exits with pytest's status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

#: The versions the observations in
#: benchmarks/results/serve/langgraph-dev-observations.md were made with.
PACKAGES = (
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph-sdk==0.4.14",
)

#: No analytics, no version check against PyPI, no LangSmith tracing: the
#: server talks to nothing but its clients on loopback.
QUIET_ENV = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}

START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0


def ensure_venv(venv: Path) -> Path:
    """The ``langgraph`` command of ``venv``, installed there first if missing."""
    command = venv / "bin" / "langgraph"
    if not command.exists():
        print(f"installing langgraph dev into {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *PACKAGES],
            check=True,
        )
    return command


def free_port() -> int:
    """A loopback port nothing listens on right now, below the kernel's range
    of ephemeral ports: a server killed and restarted on it finds it free
    again, since no other process's socket is handed it meanwhile (one from
    that range can be, to any of the many sockets a test run opens)."""
    low = _ephemeral_low()
    for port in random.sample(range(PORTS_FROM, low), min(200, low - PORTS_FROM)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # all taken: any free port
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PORTS_FROM = 20000
"""The lowest port :func:`free_port` picks."""


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 if unknown)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return low if low > PORTS_FROM else 32768


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ok", timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """TERM the server's process group, KILL it if it is still there after
    ``STOP_TIMEOUT`` seconds, and reap the server."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # any worker left behind
        return


@contextlib.contextmanager
def langgraph_dev(command: Path, log: Path, port: int | None = None) -> Iterator[str]:
    """``langgraph dev`` serving this folder's graphs on loopback; yields its URL."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    workdir = Path(tempfile.mkdtemp(prefix="langgraph-dev-"))
    for name in ("langgraph.json", "graphs.py"):
        shutil.copy(HERE / name, workdir / name)
    args = [
        str(command), "dev", "--no-browser", "--no-reload",
        "--host", "127.0.0.1", "--port", str(port),
        "--n-jobs-per-worker", "10", "--config", "langgraph.json",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            args, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **QUIET_ENV}, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not answers(url):
            if process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {process.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"langgraph dev not answering {url}/ok in {START_TIMEOUT}s")
            time.sleep(0.1)
        yield url
    finally:
        stop_group(process)
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-langgraph-dev")
    parser.add_argument("--log", type=Path,
                        default=Path(tempfile.gettempdir()) / "langgraph-dev.log")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    command = ensure_venv(args.venv.resolve())
    with langgraph_dev(command, args.log) as url:
        print(f"langgraph dev at {url} (log: {args.log})", flush=True)
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "pytest", str(HERE), "--server-url", url, "-n", "0",
             *args.pytest_args],
            cwd=ROOT,
        )
        print(f"suite wall time: {time.monotonic() - started:.1f}s", flush=True)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
