"""The ``queue_expiry`` patch (``supervisors/_thespian/queue_expiry.py``):
driven by the same operations on a clock of its own, it fails the same
queued transmits, in the same order, and keeps the same queue as
Thespian's own ``_complete_expired_intents`` and ``_qtx``."""

from __future__ import annotations

import threading
import types
from collections import deque
from typing import Any

import pytest
import thespian.system.timing as timing
import thespian.system.transport.asyncTransportBase as atb
from hypothesis import given, settings
from hypothesis import strategies as st
from thespian.system.transport import TransmitIntent

from supervisors._thespian import queue_expiry as Q
from supervisors._thespian.fingerprint import Place, thespian_object
from supervisors._thespian.installer import in_force
from supervisors._thespian.patch_table import PATCHES

pytestmark = pytest.mark.timeout(60)

PATCH = next(p for p in PATCHES if p.name == "queue_expiry")
_ORIGINAL_COMPLETE = thespian_object(
    Place(atb.__name__, "asyncTransportBase._complete_expired_intents"))
_ORIGINAL_QUEUE = thespian_object(Place(atb.__name__, "asyncTransportBase._qtx"))


def test_the_patch_is_in_force_and_replaces_both_methods() -> None:
    assert in_force(PATCH)
    assert atb.asyncTransportBase._complete_expired_intents is Q.complete_expired_intents
    assert atb.asyncTransportBase._qtx is Q.queue_transmit
    assert _ORIGINAL_COMPLETE is not Q.complete_expired_intents


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _transport() -> Any:
    return types.SimpleNamespace(_aTB_lock=threading.Lock(),
                                 _aTB_queuedPendingTransmits=deque())


# an operation: ("queue", seconds until its quit time | None: never), ("send",
# the oldest leaves for the wire), ("tick", seconds), ("expire", the walk)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("queue"), st.one_of(st.none(), st.floats(0.0, 10.0))),
    st.tuples(st.just("send"), st.none()),
    st.tuples(st.just("tick"), st.floats(0.0, 4.0)),
    st.tuples(st.just("expire"), st.none()),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops=_OPS)
def test_the_patch_fails_what_thespian_fails(ops: list[tuple[str, Any]]) -> None:
    clock = _Clock()
    saved = [getattr(module, "currentTime") for module in (timing, Q)]  # noqa: B009
    for module in (timing, Q):
        setattr(module, "currentTime", clock)  # noqa: B010
    try:
        sides = {"thespian": (_transport(), _ORIGINAL_COMPLETE, _ORIGINAL_QUEUE),
                 "patch": (_transport(), Q.complete_expired_intents, Q.queue_transmit)}
        failed: dict[str, list[int]] = {side: [] for side in sides}
        answers: dict[str, list[Any]] = {side: [] for side in sides}
        for index, (op, value) in enumerate(ops):
            for side, (transport, complete, queue) in sides.items():
                if op == "queue":
                    intent = TransmitIntent(
                        "target", index, maxPeriod=1.0,
                        onError=lambda _r, _i, side=side, index=index: failed[side].append(index))
                    intent._quitTime._time_to_quit = None if value is None \
                        else clock.now + value
                    answers[side].append(queue(transport, intent))
                elif op == "send" and transport._aTB_queuedPendingTransmits:
                    transport._aTB_queuedPendingTransmits.popleft()
                elif op == "expire":
                    answers[side].append(complete(transport))
            if op == "tick":
                clock.now += value
        for side in sides:
            answers[side].append(sides[side][1](sides[side][0]))
        assert answers["patch"] == answers["thespian"]
        assert failed["patch"] == failed["thespian"]
        assert [i.message for i in sides["patch"][0]._aTB_queuedPendingTransmits] == \
            [i.message for i in sides["thespian"][0]._aTB_queuedPendingTransmits]
    finally:
        for module, kept in zip((timing, Q), saved, strict=True):
            setattr(module, "currentTime", kept)  # noqa: B010
