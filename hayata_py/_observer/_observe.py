"""``observe()``: the observer page of a system, given the system or its data dir.

For a data dir it attaches to the system ``hayata system start`` started there
(:func:`hayata_py._attach.connect`, as the ``hayata`` commands do) and detaches
when the page closes. Above :mod:`hayata_py._api` (attaching makes an
``AgentSystem``), while the page itself (:mod:`~hayata_py._observer._server`)
is below it: ``AgentSystem.observe()`` serves the page with
:func:`~hayata_py._observer._server.serve`, never through this module.
"""

from __future__ import annotations

import os
from pathlib import Path

from hayata_py._attach import connect
from hayata_py._observer._server import DEFAULT_PORT, Observer, check_address, serve
from hayata_py._observer._system import ObservedSystem


def observe(system: ObservedSystem | str | os.PathLike[str], *, port: int = DEFAULT_PORT,
            bind: str = "127.0.0.1") -> Observer:
    """Serve the observer page of ``system`` on ``bind``:``port`` (from a thread);
    return the running :class:`Observer` (its ``url`` carries the token).

    ``system``: an :class:`~hayata_py.AgentSystem` (started here or attached
    with ``connect``), or the data dir of a system started by ``hayata system
    start`` (attached to, and detached from on :meth:`Observer.close`).
    Raises :class:`~hayata_py.ConfigError` naming ``port`` (invalid, in use) or
    ``bind`` (not an address of this host), ``HayataError(code="no_system")``
    if no system runs for the data dir. ``port=0`` picks a free port.
    """
    if not isinstance(system, (str, os.PathLike)):
        return serve(system, port=port, bind=bind)
    check_address(port, bind)  # a bad option is a ConfigError, whether a system runs or not
    attached, _record = connect(Path(system))
    try:
        observer = serve(attached, port=port, bind=bind)
    except BaseException:
        attached.shutdown()
        raise
    observer.detach = attached.shutdown
    return observer
