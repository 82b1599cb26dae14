"""How the caller's receiver groups its sends (:func:`hayata_py._receiver.bundles`):
per target, in order, several as one ``Bundle``; pure, no Thespian."""

from __future__ import annotations

from typing import Any

import pytest

from hayata_py._actor_messages import Bundle
from hayata_py._receiver import BUNDLE_MAX, bundles

pytestmark = pytest.mark.timeout(30)


class _Address:
    """An actor address as the receiver keys it: by ``addressDetails``."""

    def __init__(self, port: int) -> None:
        self.addressDetails = ("127.0.0.1", port)


def _failure(log: list[str], name: str) -> Any:
    return lambda status: log.append(f"{name}:{status}")


A, A_AGAIN, B = _Address(1), _Address(1), _Address(2)


@pytest.mark.parametrize(("sends", "expected"), [
    ([], []),
    ([(A, "m1")], [(A, "m1")]),
    ([(A, "m1"), (A, "m2"), (A, "m3")], [(A, Bundle(("m1", "m2", "m3")))]),
    # an equal address is the same target; each target in the order of its first send
    ([(A, "m1"), (B, "n1"), (A_AGAIN, "m2"), (B, "n2"), (A, "m3")],
     [(A, Bundle(("m1", "m2", "m3"))), (B, Bundle(("n1", "n2")))]),
    ([(B, "n1"), (A, "m1"), (A, "m2")], [(B, "n1"), (A, Bundle(("m1", "m2")))]),
])
def test_sends_are_grouped_per_target_in_order(sends: list[tuple[Any, Any]],
                                               expected: list[tuple[Any, Any]]) -> None:
    out = bundles([(target, message, None) for target, message in sends])
    assert [(target, message) for target, message, _ in out] == expected
    assert all(failures == [] for _, _, failures in out)


def test_a_bundle_carries_the_failure_callbacks_of_its_messages() -> None:
    log: list[str] = []
    out = bundles([(A, "m1", _failure(log, "m1")), (B, "n1", _failure(log, "n1")),
                   (A, "m2", None), (A, "m3", _failure(log, "m3"))])
    (first, bundle, fails), (second, single, single_fails) = out
    assert first is A and bundle == Bundle(("m1", "m2", "m3"))
    assert second is B and single == "n1"
    for callback in fails:
        callback("dead")
    assert log == ["m1:dead", "m3:dead"]
    single_fails[0]("gone")
    assert log[-1] == "n1:gone"


def test_a_long_run_of_sends_goes_in_bundles_of_at_most_bundle_max() -> None:
    count = BUNDLE_MAX * 2 + 3
    out = bundles([(A, i, None) for i in range(count)])
    sizes = [len(m.messages) if isinstance(m, Bundle) else 1 for _, m, _ in out]
    assert sizes == [BUNDLE_MAX, BUNDLE_MAX, 3]
    carried = [x for _, m, _ in out for x in (m.messages if isinstance(m, Bundle) else (m,))]
    assert carried == list(range(count))
