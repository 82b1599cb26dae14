"""Start ``hayata serve`` for tests, and the serve_api conformance suite against it.

``python -m tests.serve.launch [-- PYTEST ARGS]`` (what ``make test-serve``
runs): starts ``hayata serve`` on a free loopback port with a temporary data
dir serving ``tests/serve_api/langgraph.json`` (copied with its ``graphs.py``
into a temporary directory), in a process group of its own; runs ``pytest
tests/serve_api --server-url URL``; stops the server's whole process group
(its actor processes too) and removes the directories, whatever happened;
exits with pytest's status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.serve_api.reference import answers, free_port, stop_group

ROOT = Path(__file__).resolve().parent.parent.parent
SUITE = ROOT / "tests" / "serve_api"
START_TIMEOUT = 120.0


@dataclass
class Served:
    """A running ``hayata serve``: its URL, process and directories."""

    url: str
    port: int
    workdir: Path
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def session(self) -> int | None:
        """The OS session of the server's actor processes (serve.json), once this
        server has written it."""
        try:
            record = json.loads((self.data_dir / "serve.json").read_text())
            return int(record["session_id"]) if record["pid"] == self.process.pid else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """``sig`` to the server and to every actor process of its system."""
        for group in (self.session, self.process.pid):
            if group is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, sig)

    def stop(self) -> None:
        """TERM the server (it stops its system), then KILL whatever is left."""
        session = self.session
        stop_group(self.process)
        if session is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(session, signal.SIGKILL)


def serve_command(workdir: Path, data_dir: Path, port: int, *args: str) -> list[str]:
    """The ``hayata serve`` command line of ``workdir/langgraph.json``, then ``args``."""
    return [sys.executable, "-m", "hayata_py", "serve", "--config",
            str(workdir / "langgraph.json"), "--data-dir", str(data_dir), "--port", str(port),
            *args]


def serve_env(**extra: str) -> dict[str, str]:
    """The environment of a server: this one, the repo on ``PYTHONPATH``, ``extra``
    (and no ``HAYATA_API_KEY`` unless in ``extra``)."""
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    env.pop("HAYATA_API_KEY", None)
    return {**env, **extra}


def start(workdir: Path, data_dir: Path, log: Path, port: int | None = None,
          args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Served:
    """``hayata serve`` of ``workdir/langgraph.json`` (with more ``args``, in
    ``env``, default :func:`serve_env`) answering ``/ok``."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        process = subprocess.Popen(
            serve_command(workdir, data_dir, port, *args),
            cwd=workdir, stdout=out, stderr=subprocess.STDOUT, env=env or serve_env(),
            start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while not answers(url):
        if process.poll() is not None:
            raise RuntimeError(f"hayata serve exited with {process.returncode}; see {log}:\n"
                               f"{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            stop_group(process)
            raise RuntimeError(f"hayata serve not answering {url}/ok in {START_TIMEOUT}s")
        time.sleep(0.1)
    return Served(url, port, workdir, data_dir, log, process)


@contextlib.contextmanager
def suite_workdir() -> Iterator[Path]:
    """A fresh temporary directory holding the suite's ``langgraph.json`` and
    ``graphs.py``, removed at the end."""
    workdir = Path(tempfile.mkdtemp(prefix="hayata-serve-"))
    try:
        for name in ("langgraph.json", "graphs.py"):
            shutil.copy(SUITE / name, workdir / name)
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def hayata_serve(log: Path | None = None, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None,
                 config: dict[str, Any] | None = None) -> Iterator[Served]:
    """``hayata serve`` of the suite's graphs in fresh temporary directories,
    with more ``args``, in ``env``, its ``langgraph.json`` updated with ``config``."""
    with suite_workdir() as workdir:
        if config:
            path = workdir / "langgraph.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
        served = None
        try:
            served = start(workdir, workdir / "data", log or workdir / "serve.log",
                           args=args, env=env)
            yield served
        finally:
            if served is not None:
                served.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path,
                        default=Path(tempfile.gettempdir()) / "hayata-serve.log")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    args.log.unlink(missing_ok=True)
    with hayata_serve(args.log) as served:
        print(f"hayata serve at {served.url} (log: {args.log})", flush=True)
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "pytest", str(SUITE), "--server-url", served.url,
             "-n", "0", *args.pytest_args], cwd=ROOT)
        print(f"suite wall time: {time.monotonic() - started:.1f}s", flush=True)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
