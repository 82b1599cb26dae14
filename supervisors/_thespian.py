"""The Thespian adapter: the one place that knows Thespian's internals.

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
- **One poll set per thread instead of a new epoll per loop turn.**
  ``TCPTransport._runWithExpiry`` built a ``selectors.DefaultSelector`` (an
  epoll: one ``epoll_create``, one ``epoll_ctl`` per socket, a ``close``) on
  every turn of its loop, about 36 us a turn. :func:`install_selector_patch`
  hands that module a selector that keeps one ``select.poll`` object per
  thread and only tells it what changed since the last turn (see
  :class:`_ReusedSelector`).
- **Debug text only when it is logged.** Thespian passes
  ``intent.identify()`` / ``envelope.identify()`` (the message's ``str``, the
  addresses) to a debug ``thesplog`` on every send and receive, so the text is
  built whether or not debug logging is on. :func:`install_describe_patch`
  makes ``identify()`` return an object that builds that text when formatted.
- **No zombie per system start.** Thespian starts an admin through a
  process that forks the admin and exits, and detaches it from
  ``multiprocessing``, so nothing waits for it: each start left a zombie in
  the caller's process. :func:`install_reap_patch` waits for it.
- **Less work per loop turn.** :func:`install_loop_patch` replaces
  ``TCPTransport._runWithExpiry`` with :func:`supervisors._tcploop.run_with_expiry`:
  the same steps, without rebuilding per turn what rarely changes.
- **A whole message per loop turn.** :func:`install_read_patch` makes the
  transport read the rest of a frame (a message or an ACK) in the turn that
  read its size, not one ``poll`` later (:mod:`supervisors._tcpread`).
- **Addresses pickled with integers.** :func:`install_address_patch` makes an
  actor address pickle its socket family and type as integers, not as enum
  members, and load them back as the same members (:mod:`supervisors._tcpaddr`).
- **The run loop on a stack chunk of its own.** :func:`install_stack_patch`
  runs each actor's loop (``ActorManager.run`` in its forked process) through
  :func:`supervisors._stack.on_own_chunk`, so a message's handling does not
  map and unmap a chunk of CPython's frame stack each time.
- **Conventions** (several systems, possibly on several hosts): Thespian reads
  its convention timings once, at import, from environment variables;
  :func:`configure_convention` sets them for the admins started afterwards.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import random
import socket
import threading
from datetime import timedelta
from typing import Any

import thespian.system.admin.convention as _convention
import thespian.system.multiprocCommon as _multiproc
import thespian.system.transport.TCPTransport as _tcp
from thespian.actors import ChildActorExited
from thespian.system.addressManager import CannotPickleAddress
from thespian.system.multiprocCommon import MultiProcReplicator
from thespian.system.transport import ReceiveEnvelope, TransmitIntent
from thespian.system.transport.IPBase import IPActorAddress
from thespian.system.utilis import partition

from supervisors._poll import _SELECTORS_SHIM
from supervisors._stack import on_own_chunk
from supervisors._tcpaddr import address_restore, address_state
from supervisors._tcploop import run_with_expiry
from supervisors._tcpread import handle_readable_incoming, next_xmit_4

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


PLAIN_THESPIAN_ENV = "SUPERVISORS_PLAIN_THESPIAN"
"""Set to ``1`` (before ``supervisors`` is imported) to keep Thespian's own
selector per loop turn, its loop, its stack, its eager ``identify()``, its
frame read over two loop turns and its enum-pickled addresses: a switch to
measure the speed patches against, not a setting."""

SELECTOR_PATCH_FITS = {
    "thespian": "4.0.1",
    "_runWithExpiry": "e91ffd352fcc",
    "_check_fd": "41abcd0cc691",
}
"""What :func:`install_selector_patch` was written against: Thespian's version
and a hash of the source of the two ``TCPTransport`` methods that use
``selectors``. Anything else and the patch is not applied."""


def _source_hash(fn: Any) -> str:
    """A hash of ``fn``'s source lines (its ``def`` and every line indented
    deeper after it), read without tokenizing: ``inspect.getsource`` on
    ``_runWithExpiry`` takes ~10 ms, paid at every import."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)
    start = code.co_firstlineno - 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip()
                                or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return hashlib.sha256("".join(lines[start:end]).encode()).hexdigest()[:12]


_THESPIAN_RUN = _tcp.TCPTransport._runWithExpiry
"""Thespian's own loop, as imported (:func:`install_loop_patch` replaces it)."""


def selector_patch_fingerprint() -> dict[str, str]:
    """The installed Thespian's values for :data:`SELECTOR_PATCH_FITS`."""
    from importlib import metadata

    return {"thespian": metadata.version("thespian"),
            "_runWithExpiry": _source_hash(_THESPIAN_RUN),
            "_check_fd": _source_hash(_tcp.TCPTransport._check_fd)}


def install_selector_patch() -> bool:
    """Give ``TCPTransport`` :class:`_ReusedSelector` instead of a new epoll per
    loop turn, in this process and every process forked from it (the admin,
    the actors). Not applied (False) if :data:`PLAIN_THESPIAN_ENV`
    is ``1`` or Thespian is not the one it was written for."""
    if _tcp.selectors is _SELECTORS_SHIM:
        return True
    if os.environ.get(PLAIN_THESPIAN_ENV) == "1" \
            or selector_patch_fingerprint() != SELECTOR_PATCH_FITS:
        return False
    _tcp.selectors = _SELECTORS_SHIM
    return True


DESCRIBE_PATCH_FITS = {
    "thespian": "4.0.1",
    "TransmitIntent.identify": "3298e98aeec4",
    "ReceiveEnvelope.identify": "aae2a5250024",
    "ReceiveEnvelope.__str__": "842230b3408f",
}
"""What :func:`install_describe_patch` was written against: Thespian's
version and the source of the methods it wraps. (That every caller of
``identify()`` in Thespian only formats it with ``%s`` is checked by
``tests/test_thespian_selector.py``.)"""

_IDENTIFY = (TransmitIntent.identify, ReceiveEnvelope.identify, ReceiveEnvelope.__str__)


def describe_patch_fingerprint() -> dict[str, str]:
    """The installed Thespian's values for :data:`DESCRIBE_PATCH_FITS`."""
    from importlib import metadata

    return {"thespian": metadata.version("thespian"),
            "TransmitIntent.identify": _source_hash(_IDENTIFY[0]),
            "ReceiveEnvelope.identify": _source_hash(_IDENTIFY[1]),
            "ReceiveEnvelope.__str__": _source_hash(_IDENTIFY[2])}


class _Described:
    """The text ``identify()`` gave, built when something formats it."""

    __slots__ = ("_of", "_text")

    def __init__(self, of: Any, text: Any) -> None:
        self._of, self._text = of, text

    def __str__(self) -> str:
        return str(self._text(self._of))

    __repr__ = __str__


def _lazy(text: Any) -> Any:
    def identify(self: Any) -> _Described:
        return _Described(self, text)
    identify._supervisors_patched = True  # type: ignore[attr-defined]
    return identify


def install_describe_patch() -> bool:
    """Make Thespian's ``identify()`` lazy (see :class:`_Described`); not applied
    (False) if :data:`PLAIN_THESPIAN_ENV` is ``1`` or Thespian is not the one it
    was written for."""
    if getattr(TransmitIntent.identify, "_supervisors_patched", False):
        return True
    if os.environ.get(PLAIN_THESPIAN_ENV) == "1" \
            or describe_patch_fingerprint() != DESCRIBE_PATCH_FITS:
        return False
    TransmitIntent.identify = _lazy(_IDENTIFY[0])
    ReceiveEnvelope.identify = _lazy(_IDENTIFY[1])
    ReceiveEnvelope.__str__ = _IDENTIFY[1]  # str(envelope) stays the text itself
    return True


def install_stack_patch() -> bool:
    """Run every actor process's loop on a frame-stack chunk of its own
    (:mod:`supervisors._stack`); not applied (False) if
    :data:`PLAIN_THESPIAN_ENV` is ``1``."""
    run = _multiproc.MultiProcManager.run
    if getattr(run, "_supervisors_patched", False):
        return True
    if os.environ.get(PLAIN_THESPIAN_ENV) == "1":
        return False

    def run_on_own_chunk(self: Any) -> None:
        on_own_chunk(run, self)

    run_on_own_chunk._supervisors_patched = True  # type: ignore[attr-defined]
    _multiproc.MultiProcManager.run = run_on_own_chunk
    return True


def install_loop_patch() -> bool:
    """Run ``TCPTransport._runWithExpiry`` as :mod:`supervisors._tcploop` does it
    (less work per turn, the same steps); only with the reused selector, so not
    applied (False) when :func:`install_selector_patch` is not."""
    if _tcp.TCPTransport._runWithExpiry is run_with_expiry:
        return True
    if not install_selector_patch():
        return False
    _tcp.TCPTransport._runWithExpiry = run_with_expiry
    return True


READ_PATCH_FITS = {
    "thespian": "4.0.1",
    "_handleReadableIncoming": "906d1d0361d8",
    "_next_XMIT_4": "24efbd88f362",
}
"""What :func:`install_read_patch` was written against: Thespian's version
and a hash of the source of the two methods it replaces."""

_THESPIAN_READ = (_tcp.TCPTransport._handleReadableIncoming, _tcp.TCPTransport._next_XMIT_4)


def read_patch_fingerprint() -> dict[str, str]:
    """The installed Thespian's values for :data:`READ_PATCH_FITS`."""
    from importlib import metadata

    return {"thespian": metadata.version("thespian"),
            "_handleReadableIncoming": _source_hash(_THESPIAN_READ[0]),
            "_next_XMIT_4": _source_hash(_THESPIAN_READ[1])}


def install_read_patch() -> bool:
    """Read a frame to its end in one loop turn (:mod:`supervisors._tcpread`);
    not applied (False) if :data:`PLAIN_THESPIAN_ENV` is ``1`` or Thespian is
    not the one it was written for."""
    if _tcp.TCPTransport._handleReadableIncoming is handle_readable_incoming:
        return True
    if os.environ.get(PLAIN_THESPIAN_ENV) == "1" \
            or read_patch_fingerprint() != READ_PATCH_FITS:
        return False
    _tcp.TCPTransport._handleReadableIncoming = handle_readable_incoming
    _tcp.TCPTransport._next_XMIT_4 = next_xmit_4
    return True


ADDRESS_PATCH_FITS = {
    "thespian": "4.0.1",
    "IPActorAddress.__getstate__": "14f20352d69d",
    "IPActorAddress.__setstate__": "",
}
"""What :func:`install_address_patch` was written against: Thespian's version,
the source of the method it replaces, and no ``__setstate__`` of its own."""

_THESPIAN_ADDRESS_STATE = IPActorAddress.__getstate__


def address_patch_fingerprint() -> dict[str, str]:
    """The installed Thespian's values for :data:`ADDRESS_PATCH_FITS`."""
    from importlib import metadata

    own = IPActorAddress.__dict__.get("__setstate__")
    return {"thespian": metadata.version("thespian"),
            "IPActorAddress.__getstate__": _source_hash(_THESPIAN_ADDRESS_STATE),
            "IPActorAddress.__setstate__": "" if own in (None, address_restore)
            else _source_hash(own)}


def install_address_patch() -> bool:
    """Pickle actor addresses with integer socket kinds (:mod:`supervisors._tcpaddr`);
    not applied (False) if :data:`PLAIN_THESPIAN_ENV` is ``1`` or Thespian is
    not the one it was written for."""
    if IPActorAddress.__getstate__ is address_state:
        return True
    if os.environ.get(PLAIN_THESPIAN_ENV) == "1" \
            or address_patch_fingerprint() != ADDRESS_PATCH_FITS:
        return False
    IPActorAddress.__getstate__ = address_state
    IPActorAddress.__setstate__ = address_restore
    return True


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
install_reap_patch()
install_selector_patch()
install_describe_patch()
install_stack_patch()
install_loop_patch()
install_read_patch()
install_address_patch()
