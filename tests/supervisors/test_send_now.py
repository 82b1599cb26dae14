"""``SupervisedActor.send_now`` (the ``push_transmits`` patch): messages an
actor sends one target from inside a handler go out while the handler still
runs, not only the first; what arrives meanwhile waits for the handler's end,
in order; a target that does not read makes ``send_now`` give up after its
``seconds`` (the message still goes, later, in order)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from supervisors import System
from supervisors._thespian.installer import in_force
from supervisors._thespian.patch_table import PATCHES
from tests.helpers import eventually
from tests.thespian_probe import patches_in_an_actor

pytestmark = pytest.mark.timeout(60)


def test_the_patch_is_in_force_here_and_in_actor_processes(system: System) -> None:
    assert in_force(next(p for p in PATCHES if p.name == "push_transmits"))
    assert patches_in_an_actor(system)["push_transmits"] is True


def _listen(system: System) -> Any:
    got = system.listen(15)
    assert got is not None, "nothing arrived within 15 s"
    return got


def test_each_message_goes_out_while_the_handler_runs_and_arrivals_wait(
        system: System, tmp_path: Path) -> None:
    pusher = system.thespian.createActor("tests.push_actors.Pusher")
    system.tell(pusher, ("push", str(tmp_path), 3))
    parts: list[int] = []
    teller: threading.Thread | None = None
    while True:
        message = _listen(system)
        if message[0] == "done":
            break
        assert message[0] == "part"
        parts.append(message[1])
        if teller is None:  # sent while the push handler runs: handled after it
            teller = threading.Thread(target=_tell_note, args=(system, pusher), daemon=True)
            teller.start()
        (tmp_path / f"seen-{message[1]}").touch()  # only now may the actor go on
    assert message == ("done", [True, True, True], None)
    assert parts == [1, 2, 3]
    assert teller is not None
    teller.join(15)
    assert not teller.is_alive()
    assert system.ask(pusher, ("order",), 15) == ("order", ["push", "during"])


def _tell_note(system: System, pusher: Any) -> None:
    """A tell waits for the actor's ACK: from an endpoint of its own, in a thread."""
    endpoint = system.new_endpoint()
    try:
        endpoint.tell(pusher, ("note", "during"))
    finally:
        endpoint.exit_clone()


def test_a_target_that_does_not_read_makes_send_now_give_up_in_time(
        system: System, tmp_path: Path) -> None:
    pusher = system.thespian.createActor("tests.push_actors.Pusher")
    holder = system.thespian.createActor("tests.push_actors.Holder")
    system.tell(holder, ("hold", str(tmp_path)))
    eventually(lambda: (tmp_path / "holding").exists(), timeout=15, message="holder blocked")
    sent, first, _ = system.ask(pusher, ("to", holder, 0.3, "m1"), 15)
    assert (sent, first) == ("sent", True)  # written: the holder's kernel takes it
    sent, second, took = system.ask(pusher, ("to", holder, 0.3, "m2"), 15)
    assert (sent, second) == ("sent", False)  # m1 not acknowledged: m2 waits
    assert 0.3 <= took < 5
    (tmp_path / "release").touch()
    assert eventually(lambda: system.ask(holder, ("got",), 15) == ["m1", "m2"],
                      timeout=15, message="both messages, in order")
