"""Start and stop an observer: bind its socket, serve it with uvicorn on a thread.

The socket is bound here, before uvicorn starts, so a port in use or an
address not of this host is a :class:`~hayata_py.ConfigError` naming
``port`` or ``bind`` (and nothing has started), and ``port=0`` picks a free port
whose number :attr:`Observer.port` tells.

It serves a system it is given (:func:`serve`, what ``AgentSystem.observe()``
calls) and sees it as :class:`~hayata_py._observer._system.ObservedSystem`, so
it sits below :mod:`hayata_py._api`; attaching by data dir is
:mod:`~hayata_py._observer._observe`, above it.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import uvicorn

from hayata_py._datadir import DATA_DIR_ENV, DEFAULT_DATA_DIR
from hayata_py._errors import ConfigError
from hayata_py._observer import _security
from hayata_py._observer._actions import Actions
from hayata_py._observer._app import create_app
from hayata_py._observer._hub import Hub
from hayata_py._observer._system import ObservedSystem
from hayata_py._observer._watch import Source, Watcher

DEFAULT_PORT = 8765
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def _hint(data_dir: Path) -> str:
    """`` --data-dir X`` for the commands the page shows; empty when X is implied."""
    implied = [Path(DEFAULT_DATA_DIR).resolve()]
    if os.environ.get(DATA_DIR_ENV):
        implied.append(Path(os.environ[DATA_DIR_ENV]).resolve())
    return "" if data_dir.resolve() in implied else f" --data-dir {data_dir}"


def check_address(port: object, bind: object) -> tuple[int, str]:
    """``port`` and ``bind`` as the socket takes them; a ``ConfigError`` naming the bad one."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError("port", f"must be a TCP port number 1-65535 (0: any free port), "
                          f"got {port!r}")
    try:
        address = ipaddress.ip_address(bind if isinstance(bind, str) else "")
    except ValueError:
        raise ConfigError("bind", f"must be an IP address of this host, e.g. 127.0.0.1 "
                          f"(the default), got {bind!r}") from None
    return port, str(address)


def _listen(bind: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ipaddress.ip_address(bind).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError("port", f"{port} is already in use on {bind} (another observer "
                              "or server?); choose another port, or 0 for a free one") from None
        if exc.errno == errno.EACCES:
            raise ConfigError("port", f"{port} needs privileges to bind; use a port "
                              "above 1023") from None
        raise ConfigError("bind", f"cannot listen on {bind} ({exc.strerror}); give an "
                          "address of this host, e.g. 127.0.0.1") from None
    sock.setblocking(False)
    return sock


class Observer:
    """A running observer page; :meth:`close` stops it (the system keeps running).

    ``url`` holds the per-start token; give it only to whoever may drill the system.
    """

    def __init__(self, system: ObservedSystem, sock: socket.socket, bind: str) -> None:
        self.token = _security.new_token()
        self.bind = bind
        self.port: int = sock.getsockname()[1]
        shown = "127.0.0.1" if ipaddress.ip_address(bind).is_unspecified else bind
        host = f"[{shown}]" if ":" in shown else shown
        self.url = f"http://{host}:{self.port}/?token={self.token}"
        self._hub = Hub()
        source = Source(system, _hint(Path(system.data_dir)))
        self._actions = Actions(source, self._hub)
        self._watcher = Watcher(source, self._hub)
        ready = threading.Event()
        app = create_app(self._actions, self._hub, self.token,
                         _security.allowed_hosts(bind), ready)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="hayata-observe-server", daemon=True)
        self._sock = sock
        self.detach: Callable[[], None] | None = None
        """Called by :meth:`close`: detaches from a system the observer attached to."""
        self._thread.start()
        if not ready.wait(START_TIMEOUT) or not self._thread.is_alive():
            self.close()
            raise RuntimeError(f"the observer did not start within {START_TIMEOUT}s")
        self._watcher.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server ends (or ``timeout`` s pass); True if it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop serving: end the streams, stop polling, close the socket (idempotent)."""
        self._actions.close()
        self._watcher.close()
        loop = self._hub.loop
        if loop is not None and not self._hub.closed.is_set():
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(self._hub.close)
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT)
        self._sock.close()
        detach, self.detach = self.detach, None
        if detach is not None:
            detach()

    def __enter__(self) -> Observer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def serve(system: ObservedSystem, *, port: int = DEFAULT_PORT, bind: str = "127.0.0.1"
          ) -> Observer:
    """Serve the observer page of ``system`` on ``bind``:``port`` (from a thread);
    return the running :class:`Observer` (its ``url`` carries the token).
    Raises :class:`~hayata_py.ConfigError` naming ``port`` (invalid, in use) or
    ``bind`` (not an address of this host). ``port=0`` picks a free port.
    """
    port, bind = check_address(port, bind)
    return Observer(system, _listen(bind, port), bind)
