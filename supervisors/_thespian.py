"""The Thespian adapter: with :mod:`supervisors._speed`, the one place that
knows Thespian's internals.

- **Loopback only by default.** Thespian binds every actor socket to
  ``0.0.0.0`` and messages are pickles, so anyone who can reach a port could
  run code. Importing this module makes every socket bind to the address in
  ``SUPERVISORS_BIND`` (default ``127.0.0.1``) and advertise the same
  address. Binding elsewhere is an explicit choice (``System(bind=...)``) for
  multi-host deployments inside a private network.
- Actor processes are forked from the admin, which inherits the patched
  class and the environment, so the setting holds in every process.
- **Every child's death is reported.** Thespian 4.0.1 reaps, while handling
  one ``ChildActorExited``, every other child process that is dead by then,
  and never reports those: two children killed a few milliseconds apart
  leave their parent believing one still runs. :func:`install_exit_patch`
  makes it report each one it reaps (see ``MultiProcReplicator._childExited``).
- **An exiting actor's last sends go out.** Thespian 4.0.1 drains an exiting
  actor's transmits by running its transport until nothing is left to send,
  but a timer of the actor (``wakeupAfter``) that falls due meanwhile ends
  the drain at once, falsy like "nothing left": the process exits with its
  last messages unsent (what an actor said in its stop hook, e.g. the end of
  a run to its subscriber). :func:`install_drain_patch` keeps draining past
  such timers (they are dropped: the actor is gone), up to Thespian's limit.
- **No zombie per system start.** Thespian starts an admin through a
  process that forks the admin and exits, and detaches it from
  ``multiprocessing``, so nothing waits for it: each start left a zombie in
  the caller's process. :func:`install_reap_patch` waits for it.
- **Speed.** Thespian's transport does more per message than it needs to;
  :mod:`supervisors._speed` holds the patches that make it do less (a poll
  set per thread, a loop that rebuilds nothing per turn, lazy debug text, a
  whole frame per turn, integer socket kinds in pickled addresses, the loop
  on its own stack chunk), each checked against the Thespian it was written
  for and installed here.
- **Conventions** (several systems, possibly on several hosts): Thespian reads
  its convention timings once, at import, from environment variables;
  :func:`configure_convention` sets them for the admins started afterwards.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from datetime import timedelta
from typing import Any

import thespian.system.admin.convention as _convention
import thespian.system.multiprocCommon as _multiproc
import thespian.system.systemCommon as _common
from thespian.actors import ChildActorExited
from thespian.system.addressManager import CannotPickleAddress
from thespian.system.multiprocCommon import MultiProcReplicator
from thespian.system.timing import ExpirationTimer, unexpired
from thespian.system.transport import ReceiveEnvelope, TransmitIntent, TransmitOnly
from thespian.system.transport.IPBase import IPActorAddress
from thespian.system.utilis import partition

from supervisors._speed import install_speed_patches

BIND_ENV = "SUPERVISORS_BIND"
ADMIN_ENV = "SUPERVISORS_ADMIN"
"""``host:port`` of the admin of the system an actor process belongs to (set
before the admin is forked, so every actor of that system inherits it)."""
CONVENTION_ADDRESS = "Convention Address.IPv4"
DEFAULT_BIND = "127.0.0.1"
SYSTEM_BASE = "multiprocTCPBase"


def bind_host() -> str:
    return os.environ.get(BIND_ENV, DEFAULT_BIND)


def _bind_args(self: Any) -> tuple[tuple[str, int], ...]:
    host, port = self.bindname[0], self.bindname[1]
    if host in ("", "0.0.0.0"):
        host = bind_host()
    return ((host, port),)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
ADVERTISE_ENV = "THESPIAN_BASE_IPADDR"
_ADVERTISE_DEFAULTED = "SUPERVISORS_ADVERTISE_DEFAULTED"
"""Set (to the value) when :func:`install_loopback_patch` chose ``THESPIAN_BASE_IPADDR``."""


def install_loopback_patch() -> None:
    """Make Thespian bind to :func:`bind_host` instead of all interfaces.

    With a loopback bind and no ``THESPIAN_BASE_IPADDR``, that variable is set
    to the bind host too: Thespian would otherwise advertise the host's
    outward address for sockets that only listen on loopback, and a plain
    ``ActorSystem("multiprocTCPBase")`` started after ``import supervisors``
    (or an actor created by a process that imported it late) would be
    unreachable ("... is not a valid ActorSystem admin").
    """
    if bind_host() in LOOPBACK_HOSTS and ADVERTISE_ENV not in os.environ:
        os.environ[ADVERTISE_ENV] = os.environ[_ADVERTISE_DEFAULTED] = bind_host()
    if getattr(IPActorAddress, "_supervisors_patched", False):
        return
    IPActorAddress.bindArgs = property(_bind_args)
    IPActorAddress._supervisors_patched = True


def _child_exited(self: Any, child_address: Any) -> None:
    """``MultiProcReplicator._childExited`` that loses no exit.

    Thespian calls it after the actor handled ``ChildActorExited(child_address)``
    and drops every dead child process from its table there. Its own version
    drops them silently; the ``SIGCHLD`` handler (``childDied``), which would
    have reported them, then finds nothing left to report. Here each dead child
    other than ``child_address`` gets its ``ChildActorExited``, exactly as
    ``childDied`` sends it: a child leaves the table only with its exit sent.
    """
    children = getattr(self, "_child_procs", [])
    self._child_procs, dead = partition(self._checkChildLiveness, children)
    for each in dead:
        address = getattr(each, "childRealAddr", each.childAddr)
        if address == child_address or each.childAddr == child_address:
            continue
        try:
            self.transport.scheduleTransmit(
                None, TransmitIntent(self.transport.myAddress, ChildActorExited(address)))
        except CannotPickleAddress:
            continue  # a child that never got a real address: nobody knows it


def install_exit_patch() -> None:
    """Make Thespian report every child process it reaps (see :func:`_child_exited`)."""
    if getattr(MultiProcReplicator, "_supervisors_patched", False):
        return
    MultiProcReplicator._childExited = _child_exited
    MultiProcReplicator._supervisors_patched = True


def _drain_transmits(self: Any) -> None:
    """``systemCommonBase.drainTransmits`` that a timer falling due does not end.

    Thespian's transport returns a due ``wakeupAfter`` as a ``ReceiveEnvelope``,
    which is falsy, and its drain stopped at the first falsy answer as if no
    transmit were left. Here it stops when none is left (``0``), when the
    transport ended, or at Thespian's drain limit; a timer is dropped (the
    actor exits: nobody would handle it)."""
    limit = ExpirationTimer(_common.MAX_SHUTDOWN_DRAIN_PERIOD)
    for remaining in unexpired(limit):
        left = self.transport.run(TransmitOnly, remaining.remaining())
        if not left and not isinstance(left, ReceiveEnvelope):
            break


def install_drain_patch() -> None:
    """Make an exiting actor send what it still holds (see :func:`_drain_transmits`)."""
    drain = _common.systemCommonBase.drainTransmits
    if getattr(drain, "_supervisors_patched", False):
        return
    _drain_transmits._supervisors_patched = True  # type: ignore[attr-defined]
    _common.systemCommonBase.drainTransmits = _drain_transmits


def _detach_and_reap(child: Any, _detach: Any = _multiproc.detach_child) -> None:
    """``detach_child`` that still waits, in a thread, for the admin's launcher
    (it exits as soon as it has forked the admin); actors' children are left to
    Thespian, which reaps them."""
    _detach(child)
    if getattr(child, "name", None) == "ThespianAdmin":
        threading.Thread(target=child.join, name="supervisors-reap", daemon=True).start()


def install_reap_patch() -> None:
    """Reap the process that launches each admin (see :func:`_detach_and_reap`)."""
    if getattr(_multiproc.detach_child, "_supervisors_patched", False):
        return
    _detach_and_reap._supervisors_patched = True  # type: ignore[attr-defined]
    _multiproc.detach_child = _detach_and_reap


def prepare_environment(bind: str) -> None:
    """Set the bind and advertised address for this process and its forks."""
    os.environ[BIND_ENV] = bind
    if bind not in ("0.0.0.0", ""):
        os.environ[ADVERTISE_ENV] = bind
    elif os.environ.get(ADVERTISE_ENV) == os.environ.get(_ADVERTISE_DEFAULTED):
        # All interfaces: Thespian finds the outward address again, unless the
        # user chose one (the loopback default set at import is not a choice).
        os.environ.pop(ADVERTISE_ENV, None)
    install_loopback_patch()


def configure_convention(period: float, misses: int) -> None:
    """Set Thespian's convention timings for the systems started from now on.

    A member re-registers with the leader every ``period`` seconds and is
    declared dead after ``misses`` missed registrations. Thespian's *restart*
    period is set to the same value: left at its default (3 min 22 s), a member
    that has not heard back from the leader sleeps that long before its next
    registration, and the leader drops it as dead although it is alive.

    Thespian reads these once, at import; each admin is forked from the
    process that starts it and so inherits the module values set here (and
    the environment, for processes that import Thespian afresh).
    """
    whole = max(1, round(period))
    text = f"{whole // 60}:{whole % 60:02d}"
    for name in ("CONVENTION_REREGISTRATION_PERIOD", "CONVENTION_RESTART_PERIOD"):
        os.environ[name] = text
        setattr(_convention, name, timedelta(seconds=period))
    os.environ["CONVENTION_REGISTRATION_MISS_MAX"] = str(misses)
    _convention.CONVENTION_REGISTRATION_MISS_MAX = misses


def own_admin() -> str:
    """``host:port`` of this actor process's admin ('' outside a supervised system)."""
    return os.environ.get(ADMIN_ENV, "")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = DEFAULT_BIND) -> int:
    """A TCP port for an admin that was free a moment ago on ``host``.

    Chosen *below* the kernel's ephemeral range: every actor socket binds port
    0 and so draws from that range, and an admin port picked there could be
    taken by another system's actor between this check and the admin's bind
    (seen once in a full test run: the system failed to start).
    """
    low = max(1024, min(_ephemeral_low(), 65536) - 12000)
    high = max(low + 1, _ephemeral_low() - 1)
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_defs() -> dict[str, Any]:
    """Thespian's own logging: warnings and errors as ``thespian_log`` lines of
    the system's structlog log (``SUPERVISORS_LOG_FILE``; without one, stderr),
    never Thespian's raw text on the caller's terminal."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"main": {"class": "supervisors._log.ThespianHandler", "level": "WARNING"}},
        "root": {"handlers": ["main"], "level": "WARNING"},
    }


install_loopback_patch()
install_exit_patch()
install_drain_patch()
install_reap_patch()
install_speed_patches()
