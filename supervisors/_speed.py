"""The speed patches of Thespian's transport, each written against Thespian
4.0.1 and applied only where the source it replaces is unchanged (a hash of
that source, ``*_FITS``); :mod:`supervisors._thespian` installs them at
import, in the caller and in every process forked from it.

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
"""

from __future__ import annotations

import hashlib
import linecache
import os
from collections.abc import Callable
from typing import Any

import thespian.system.multiprocCommon as _multiproc
import thespian.system.transport.TCPTransport as _tcp
from thespian.system.transport import ReceiveEnvelope, TransmitIntent
from thespian.system.transport.IPBase import IPActorAddress

from supervisors._poll import _SELECTORS_SHIM
from supervisors._stack import on_own_chunk
from supervisors._tcpaddr import address_restore, address_state
from supervisors._tcploop import run_with_expiry
from supervisors._tcpread import handle_readable_incoming, next_xmit_4

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


def _thespian_version() -> str:
    from importlib import metadata

    return metadata.version("thespian")


def _fits(fits: dict[str, str], fingerprint: Callable[[], dict[str, str]]) -> bool:
    """A patch may be applied: :data:`PLAIN_THESPIAN_ENV` is not ``1`` and the
    installed Thespian is the one it was written for."""
    return os.environ.get(PLAIN_THESPIAN_ENV) != "1" and fingerprint() == fits


_THESPIAN_RUN = _tcp.TCPTransport._runWithExpiry
"""Thespian's own loop, as imported (:func:`install_loop_patch` replaces it)."""


def selector_patch_fingerprint() -> dict[str, str]:
    """The installed Thespian's values for :data:`SELECTOR_PATCH_FITS`."""
    return {"thespian": _thespian_version(),
            "_runWithExpiry": _source_hash(_THESPIAN_RUN),
            "_check_fd": _source_hash(_tcp.TCPTransport._check_fd)}


def install_selector_patch() -> bool:
    """Give ``TCPTransport`` :class:`_ReusedSelector` instead of a new epoll per
    loop turn, in this process and every process forked from it (the admin,
    the actors). Not applied (False) if :data:`PLAIN_THESPIAN_ENV`
    is ``1`` or Thespian is not the one it was written for."""
    if _tcp.selectors is _SELECTORS_SHIM:
        return True
    if not _fits(SELECTOR_PATCH_FITS, selector_patch_fingerprint):
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
    return {"thespian": _thespian_version(),
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
    if not _fits(DESCRIBE_PATCH_FITS, describe_patch_fingerprint):
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
    return {"thespian": _thespian_version(),
            "_handleReadableIncoming": _source_hash(_THESPIAN_READ[0]),
            "_next_XMIT_4": _source_hash(_THESPIAN_READ[1])}


def install_read_patch() -> bool:
    """Read a frame to its end in one loop turn (:mod:`supervisors._tcpread`);
    not applied (False) if :data:`PLAIN_THESPIAN_ENV` is ``1`` or Thespian is
    not the one it was written for."""
    if _tcp.TCPTransport._handleReadableIncoming is handle_readable_incoming:
        return True
    if not _fits(READ_PATCH_FITS, read_patch_fingerprint):
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
    own = IPActorAddress.__dict__.get("__setstate__")
    return {"thespian": _thespian_version(),
            "IPActorAddress.__getstate__": _source_hash(_THESPIAN_ADDRESS_STATE),
            "IPActorAddress.__setstate__": "" if own in (None, address_restore)
            else _source_hash(own)}


def install_address_patch() -> bool:
    """Pickle actor addresses with integer socket kinds (:mod:`supervisors._tcpaddr`);
    not applied (False) if :data:`PLAIN_THESPIAN_ENV` is ``1`` or Thespian is
    not the one it was written for."""
    if IPActorAddress.__getstate__ is address_state:
        return True
    if not _fits(ADDRESS_PATCH_FITS, address_patch_fingerprint):
        return False
    IPActorAddress.__getstate__ = address_state
    IPActorAddress.__setstate__ = address_restore
    return True


def install_speed_patches() -> None:
    """Install every patch of this module that fits the installed Thespian."""
    install_selector_patch()
    install_describe_patch()
    install_stack_patch()
    install_loop_patch()
    install_read_patch()
    install_address_patch()
