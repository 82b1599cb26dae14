"""The in-memory tail of a run's log (``hayata_py.serve._tails``): a stream
gets rows from it only when they are all there from its position on."""

from __future__ import annotations

import pytest

from hayata_py.serve._tails import KEPT, Tails

pytestmark = pytest.mark.timeout(10)


def _rows(first: int, last: int) -> list[tuple[int, str, str]]:
    return [(seq, "values", str(seq)) for seq in range(first, last + 1)]


def test_rows_after_a_position_come_with_the_status() -> None:
    tails = Tails()
    tails.open("r")
    assert tails.after("r", 0) is None  # nothing kept yet: the store says
    tails.logged("r", _rows(1, 3))
    assert tails.after("r", 0) == ("running", _rows(1, 3))
    assert tails.after("r", 2) == ("running", _rows(3, 3))
    assert tails.after("r", 3) == ("running", [])
    tails.ended("r", "success")
    assert tails.after("r", 3) == ("success", [])


def test_a_run_not_carried_out_here_reads_the_store() -> None:
    tails = Tails()
    tails.logged("r", _rows(1, 2))  # never opened: nothing kept
    assert tails.after("r", 0) is None
    tails.open("r")
    tails.logged("r", _rows(1, 2))
    tails.close("r")
    assert tails.after("r", 0) is None


def test_a_stream_behind_the_kept_rows_reads_the_store() -> None:
    tails = Tails()
    tails.open("r")
    tails.logged("r", _rows(1, KEPT + 10))
    assert tails.after("r", 0) is None  # rows 1-10 are no longer kept
    assert tails.after("r", 10) == ("running", _rows(11, KEPT + 10))


def test_a_resumed_run_is_kept_from_its_first_new_row() -> None:
    tails = Tails()
    tails.open("r")
    tails.logged("r", _rows(8, 9))  # rows 1-7 were logged before a restart
    assert tails.after("r", 3) is None
    assert tails.after("r", 7) == ("running", _rows(8, 9))


def test_a_gap_keeps_only_what_follows_it() -> None:
    tails = Tails()
    tails.open("r")
    tails.logged("r", _rows(1, 2))
    tails.logged("r", _rows(5, 6))
    assert tails.after("r", 2) is None
    assert tails.after("r", 4) == ("running", _rows(5, 6))
