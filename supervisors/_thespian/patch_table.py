"""Every patch ``supervisors`` makes to Thespian, in one table.

Each row (:class:`Patch`) says which attributes of Thespian it replaces and
with what, which of Thespian's functions it was written against and their
fingerprint then (:mod:`supervisors._thespian.fingerprint`), and whether
correctness depends on it (:attr:`PatchKind.CORRECTNESS`) or only speed
(:attr:`PatchKind.SPEED`). :mod:`supervisors._thespian.installer` installs
the rows in order. The replacements live in one module per concern, named in
each row.

Every fingerprint was taken on Thespian :data:`THESPIAN_VERSION`, the version
``pyproject.toml`` pins; ``tests/test_thespian_patch_table.py`` fails when the
pin, the installed Thespian and these fingerprints disagree. On a new
Thespian: read each changed function against its replacement, then update the
fingerprint here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from supervisors._thespian import (
    address_pickle,
    bind_address,
    child_exits,
    exit_drain,
    frame_read,
    lazy_identify,
    poll_selector,
    push_transmits,
    queue_expiry,
    stack_chunk,
    transport_loop,
)
from supervisors._thespian.fingerprint import Place

__all__ = ["PATCHES", "THESPIAN_VERSION", "Patch", "PatchKind", "Replacement"]

THESPIAN_VERSION = "4.0.1"
"""The Thespian every fingerprint of :data:`PATCHES` was taken on."""


class PatchKind(Enum):
    CORRECTNESS = "correctness"
    """``supervisors`` is wrong without it (an open port, a lost exit, a
    leaked process): on a Thespian whose source differs, importing
    ``supervisors`` fails (:class:`supervisors._errors.ThespianMismatch`)."""
    SPEED = "speed"
    """Only faster: on a Thespian whose source differs, it is skipped (Thespian's
    own code runs) and the skip is logged once, at import."""


@dataclass(frozen=True)
class Replacement:
    """``place`` holds ``new`` while the patch is in force."""

    place: Place
    new: Any


@dataclass(frozen=True)
class Patch:
    """One patch: replaces ``replaces`` (together: all or none), written against
    the source of ``written_against`` as it was when its hash was
    ``fingerprint``."""

    name: str
    kind: PatchKind
    does: str
    """What the patch changes, in one line."""
    replaces: tuple[Replacement, ...]
    written_against: tuple[Place, ...]
    fingerprint: str
    requires: tuple[str, ...] = field(default=())
    """Patches it works only with: skipped with any of them."""


_TCP = "thespian.system.transport.TCPTransport"
_TRANSPORT = "thespian.system.transport"
_IP = "thespian.system.transport.IPBase"
_MULTIPROC = "thespian.system.multiprocCommon"
_COMMON = "thespian.system.systemCommon"
_ASYNC = "thespian.system.transport.asyncTransportBase"


def _at(module: str, *attributes: str) -> tuple[Place, ...]:
    return tuple(Place(module, attribute) for attribute in attributes)


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="loopback_bind",
        kind=PatchKind.CORRECTNESS,
        does="bind every actor socket to SUPERVISORS_BIND (loopback by default), "
             "not all interfaces (bind_address)",
        replaces=(Replacement(Place(_IP, "IPActorAddress.bindArgs"), bind_address.BIND_ARGS),),
        written_against=_at(_IP, "IPActorAddress.bindArgs"),
        fingerprint="cc95f5fab01f",
    ),
    Patch(
        name="child_exits",
        kind=PatchKind.CORRECTNESS,
        does="report every dead child process reaped while handling another's exit "
             "(child_exits)",
        replaces=(Replacement(Place(_MULTIPROC, "MultiProcReplicator._childExited"),
                              child_exits.child_exited),),
        written_against=_at(_MULTIPROC, "MultiProcReplicator._childExited",
                            "MultiProcReplicator.childDied"),
        fingerprint="7c187d1d4967",
    ),
    Patch(
        name="launcher_reap",
        kind=PatchKind.CORRECTNESS,
        does="wait for the process that launches each admin: no zombie per system "
             "start (child_exits)",
        replaces=(Replacement(Place(_MULTIPROC, "detach_child"), child_exits.detach_and_reap),),
        written_against=_at(_MULTIPROC, "detach_child"),
        fingerprint="cc54f6f8444e",
    ),
    Patch(
        name="exit_drain",
        kind=PatchKind.CORRECTNESS,
        does="an exiting actor's last sends go out even when one of its timers falls due "
             "(exit_drain)",
        replaces=(Replacement(Place(_COMMON, "systemCommonBase.drainTransmits"),
                              exit_drain.drain_transmits),),
        written_against=_at(_COMMON, "systemCommonBase.drainTransmits"),
        fingerprint="650dd580aa9e",
    ),
    Patch(
        name="poll_selector",
        kind=PatchKind.SPEED,
        does="one poll set per thread instead of a new epoll per transport loop turn "
             "(poll_selector)",
        replaces=(Replacement(Place(_TCP, "selectors"), poll_selector.SELECTORS),),
        written_against=_at(_TCP, "TCPTransport._runWithExpiry", "TCPTransport._check_fd"),
        fingerprint="3050423d0eb3",
    ),
    Patch(
        name="lazy_identify",
        kind=PatchKind.SPEED,
        does="a message's debug text built only when it is logged (lazy_identify)",
        replaces=(
            Replacement(Place(_TRANSPORT, "TransmitIntent.identify"),
                        lazy_identify.transmit_identify),
            Replacement(Place(_TRANSPORT, "ReceiveEnvelope.identify"),
                        lazy_identify.envelope_identify),
            Replacement(Place(_TRANSPORT, "ReceiveEnvelope.__str__"), lazy_identify.ENVELOPE_STR),
        ),
        written_against=_at(_TRANSPORT, "TransmitIntent.identify", "ReceiveEnvelope.identify",
                            "ReceiveEnvelope.__str__"),
        fingerprint="356c7049ecbf",
    ),
    Patch(
        name="stack_chunk",
        kind=PatchKind.SPEED,
        does="each actor process's loop on a frame-stack chunk of its own (stack_chunk)",
        replaces=(Replacement(Place(_MULTIPROC, "MultiProcManager.run"),
                              stack_chunk.run_on_own_chunk),),
        written_against=_at(_MULTIPROC, "MultiProcManager.run"),
        fingerprint="c5b845a5c9f7",
    ),
    Patch(
        name="transport_loop",
        kind=PatchKind.SPEED,
        does="the transport loop without rebuilding per turn what rarely changes "
             "(transport_loop)",
        replaces=(Replacement(Place(_TCP, "TCPTransport._runWithExpiry"),
                              transport_loop.run_with_expiry),),
        written_against=_at(_TCP, "TCPTransport._runWithExpiry"),
        fingerprint="e91ffd352fcc",
        requires=("poll_selector",),
    ),
    Patch(
        name="frame_read",
        kind=PatchKind.SPEED,
        does="a whole message or ACK read in the loop turn that read its size (frame_read)",
        replaces=(
            Replacement(Place(_TCP, "TCPTransport._handleReadableIncoming"),
                        frame_read.handle_readable_incoming),
            Replacement(Place(_TCP, "TCPTransport._next_XMIT_4"), frame_read.next_xmit_4),
        ),
        written_against=_at(_TCP, "TCPTransport._handleReadableIncoming",
                            "TCPTransport._next_XMIT_4"),
        fingerprint="ff4ab248e0c0",
    ),
    Patch(
        name="address_pickle",
        kind=PatchKind.SPEED,
        does="actor addresses pickled with integer socket kinds (address_pickle)",
        replaces=(
            Replacement(Place(_IP, "IPActorAddress.__getstate__"), address_pickle.address_state),
            Replacement(Place(_IP, "IPActorAddress.__setstate__"),
                        address_pickle.address_restore),
        ),
        # Thespian's __getstate__, and no __setstate__ of its own (the empty source).
        written_against=_at(_IP, "IPActorAddress.__getstate__", "IPActorAddress.__setstate__"),
        fingerprint="4169b1689e5c",
    ),
    Patch(
        name="push_transmits",
        kind=PatchKind.SPEED,
        does="a handler can have its sends to one target go out while it runs, without "
             "dispatching what arrives (push_transmits)",
        replaces=(
            Replacement(Place(_TCP, "TCPTransport.push_transmits"),
                        push_transmits.push_transmits),
            Replacement(Place(_TCP, "TCPTransport.take_acks"), push_transmits.take_acks),
        ),
        written_against=_at(_TCP, "TCPTransport._runWithExpiry", "TCPTransport._next_XMIT_1",
                            "TCPTransport._next_XMIT_3", "TCPTransport._next_XMIT_4",
                            "TCPTransport._check_XMIT_4_done", "TCPTransport._processIntents",
                            "TCPTransport._processIntentTimeouts", "TCPTransport._finishIntent",
                            "TCPTransport.set_watch"),
        fingerprint="3be4c99318f2",
    ),
    Patch(
        name="queue_expiry",
        kind=PatchKind.SPEED,
        does="the queue of waiting transmits walked for expired ones only once one can "
             "have expired (queue_expiry)",
        replaces=(
            Replacement(Place(_ASYNC, "asyncTransportBase._complete_expired_intents"),
                        queue_expiry.complete_expired_intents),
            Replacement(Place(_ASYNC, "asyncTransportBase._qtx"), queue_expiry.queue_transmit),
        ),
        written_against=(*_at(_ASYNC, "asyncTransportBase._complete_expired_intents",
                              "asyncTransportBase._qtx", "asyncTransportBase._runQueued"),
                         *_at(_TRANSPORT, "TransmitIntent.__init__", "TransmitIntent.expired")),
        fingerprint="4db3728ab9c4",
    ),
)
"""Every patch, in the order it is installed."""
