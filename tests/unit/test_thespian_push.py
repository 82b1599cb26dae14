"""The ``push_transmits`` patch (``supervisors/_thespian/push_transmits.py``)
on stand-in transports: which messages to a target count as unwritten, and
that nothing is done off the main thread or while the run is aborted. In
actor processes: ``tests/supervisors/test_send_now.py``."""

from __future__ import annotations

import threading
import types
from collections import deque
from typing import Any

import pytest
import thespian.system.transport.TCPTransport as tcp

from supervisors._thespian import push_transmits as P

pytestmark = pytest.mark.timeout(60)

T = tcp.TCPTransport


def _intent(target: str, stage: int) -> Any:
    return types.SimpleNamespace(targetAddr=target, stage=stage)


def _transport(intents: list[Any] = (), waiting: list[Any] = (), queued: list[Any] = ()
               ) -> Any:
    return types.SimpleNamespace(
        _transmitIntents={i: intent for i, intent in enumerate(intents, start=10)},
        _waitingTransmits=list(waiting), _aTB_queuedPendingTransmits=deque(queued))


def test_the_stage_numbers_are_thespians() -> None:
    assert (T._XMITStepShutdownWrite, T._XMITStepWaitForAck) == (P._WRITTEN, P._WAIT_FOR_ACK)


@pytest.mark.parametrize("stage", [T._XMITStepSendConnect, T._XMITStepSendData,
                                   T._XMITStepRetry])
def test_a_message_not_yet_written_is_unwritten(stage: int) -> None:
    assert P.unwritten(_transport([_intent("a", stage)]), "a")
    assert not P.unwritten(_transport([_intent("a", stage)]), "b")


@pytest.mark.parametrize("stage", [T._XMITStepShutdownWrite, T._XMITStepWaitForAck])
def test_a_written_message_is_not(stage: int) -> None:
    assert not P.unwritten(_transport([_intent("a", stage)]), "a")


def test_one_waiting_for_its_turn_or_queued_above_the_transport_is_unwritten() -> None:
    assert P.unwritten(_transport(waiting=[_intent("a", 1)]), "a")
    assert P.unwritten(_transport(queued=[_intent("a", 1)]), "a")
    assert not P.unwritten(_transport(waiting=[_intent("b", 1)], queued=[_intent("b", 1)]),
                           "a")


def test_nothing_is_done_off_the_main_thread_or_while_the_run_is_aborted() -> None:
    transport = _transport([_intent("a", T._XMITStepSendData)])  # no loop: touching fails
    answers: list[bool] = []
    thread = threading.Thread(target=lambda: answers.append(
        P.push_transmits(transport, "a", 1.0)))
    thread.start()
    thread.join(10)
    assert answers == [False]
    transport._aborting_run = False
    assert P.push_transmits(transport, "a", 1.0) is False


def test_take_acks_steps_only_the_sockets_with_an_ack_to_read() -> None:
    import socket

    ready, ours = socket.socketpair()
    idle, other = socket.socketpair()
    try:
        ours.send(b"ack")  # the target's ACK is there to read on `ready`
        stepped: list[int] = []
        told: list[Any] = []
        done = types.SimpleNamespace(tx_done=told.append)
        transport = types.SimpleNamespace(
            _transmitIntents={ready.fileno(): _intent("a", T._XMITStepWaitForAck),
                              idle.fileno(): _intent("a", T._XMITStepWaitForAck)},
            _finished_intents=[],
            _exclusively_processing=lambda: True, _not_processing=lambda: None)

        def step(fd: int) -> bool:
            stepped.append(fd)
            transport._finished_intents.append((done, "sent"))
            return True

        transport._processIntents = step
        P.take_acks(transport, "b")  # another target: nothing read
        assert stepped == []
        P.take_acks(transport, "a")
        assert stepped == [ready.fileno()]
        assert told == ["sent"] and transport._finished_intents == []
    finally:
        for s in (ready, ours, idle, other):
            s.close()
