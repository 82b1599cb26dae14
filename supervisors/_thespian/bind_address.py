"""Where actor sockets bind and which address they advertise.

Thespian binds every actor socket to ``0.0.0.0`` and messages are pickles, so
anyone who can reach a port could run code. The ``loopback_bind`` patch
(:data:`BIND_ARGS`, in :mod:`supervisors._thespian.patch_table`) makes every
socket bind to the address in ``SUPERVISORS_BIND`` (default ``127.0.0.1``)
and :func:`advertise_loopback_by_default` makes it advertise the same
address. Binding elsewhere is an explicit choice (``System(bind=...)``,
:func:`prepare_environment`) for multi-host deployments inside a private
network. Actor processes are forked from the admin, which inherits the
patched class and the environment, so the setting holds in every process.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "ADVERTISE_ENV",
    "BIND_ARGS",
    "BIND_ENV",
    "DEFAULT_BIND",
    "LOOPBACK_HOSTS",
    "advertise_loopback_by_default",
    "bind_args",
    "bind_host",
    "prepare_environment",
]

BIND_ENV = "SUPERVISORS_BIND"
DEFAULT_BIND = "127.0.0.1"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
ADVERTISE_ENV = "THESPIAN_BASE_IPADDR"
_ADVERTISE_DEFAULTED = "SUPERVISORS_ADVERTISE_DEFAULTED"
"""Set (to the value) when :func:`advertise_loopback_by_default` chose
``THESPIAN_BASE_IPADDR``."""


def bind_host() -> str:
    return os.environ.get(BIND_ENV, DEFAULT_BIND)


def bind_args(self: Any) -> tuple[tuple[str, int], ...]:
    """``IPActorAddress.bindArgs``: Thespian's, with all interfaces read as
    :func:`bind_host`."""
    host, port = self.bindname[0], self.bindname[1]
    if host in ("", "0.0.0.0"):
        host = bind_host()
    return ((host, port),)


BIND_ARGS = property(bind_args)
"""The ``loopback_bind`` patch's ``IPActorAddress.bindArgs``."""


def advertise_loopback_by_default() -> None:
    """With a loopback bind and no ``THESPIAN_BASE_IPADDR``, set that variable
    to the bind host too (done when ``supervisors`` is imported).

    Thespian would otherwise advertise the host's outward address for sockets
    that only listen on loopback, and a plain
    ``ActorSystem("multiprocTCPBase")`` started after ``import supervisors``
    (or an actor created by a process that imported it late) would be
    unreachable ("... is not a valid ActorSystem admin").
    """
    if bind_host() in LOOPBACK_HOSTS and ADVERTISE_ENV not in os.environ:
        os.environ[ADVERTISE_ENV] = os.environ[_ADVERTISE_DEFAULTED] = bind_host()


def prepare_environment(bind: str) -> None:
    """Set the bind and advertised address for this process and its forks."""
    os.environ[BIND_ENV] = bind
    if bind not in ("0.0.0.0", ""):
        os.environ[ADVERTISE_ENV] = bind
    elif os.environ.get(ADVERTISE_ENV) == os.environ.get(_ADVERTISE_DEFAULTED):
        # All interfaces: Thespian finds the outward address again, unless the
        # user chose one (the loopback default set at import is not a choice).
        os.environ.pop(ADVERTISE_ENV, None)
    advertise_loopback_by_default()
