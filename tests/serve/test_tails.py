"""The in-memory tail of a run's log (``hayata_py.serve._tails``): a stream
gets rows from it only when they are all there from its position on."""

from __future__ import annotations

import pytest

from hayata_py.serve._tails import ENDED_KEPT, ENDED_ROWS, KEPT, Tails

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


def test_a_final_run_keeps_its_status_and_last_rows_after_its_worker_is_done() -> None:
    tails = Tails()
    tails.open("r")
    tails.logged("r", _rows(1, ENDED_ROWS + 4))
    tails.ended("r", "success", final=True)
    tails.close("r")
    assert tails.status("r") == "success"
    last = ENDED_ROWS + 4
    assert tails.after("r", last) == ("success", [])
    assert tails.after("r", last - 1) == ("success", _rows(last, last))
    assert tails.after("r", 4) == ("success", _rows(5, last))
    assert tails.after("r", 3) is None  # row 4 is no longer kept: the store says


def test_a_run_that_may_go_on_is_not_kept_after_its_worker_is_done() -> None:
    tails = Tails()
    tails.open("r")
    tails.logged("r", _rows(1, 2))
    tails.ended("r", "success")  # its thread stopped: it may be carried on
    assert tails.status("r") == "success"
    tails.close("r")
    assert tails.status("r") is None
    assert tails.after("r", 2) is None


def test_forget_drops_an_ended_run_and_open_starts_it_afresh() -> None:
    tails = Tails()
    for run in ("a", "b"):
        tails.open(run)
        tails.logged(run, _rows(1, 2))
        tails.ended(run, "success", final=True)
        tails.close(run)
    tails.forget("a")
    assert tails.after("a", 2) is None
    tails.open("b")  # carried out here again: what it kept is gone
    assert tails.status("b") == "running"
    assert tails.after("b", 2) is None


def test_only_the_newest_ended_runs_are_kept() -> None:
    tails = Tails()
    for n in range(ENDED_KEPT + 1):
        tails.open(f"r{n}")
        tails.logged(f"r{n}", _rows(1, 1))
        tails.ended(f"r{n}", "error", final=True)
        tails.close(f"r{n}")
    assert tails.status("r0") is None
    assert tails.status("r1") == "error"
    assert tails.after(f"r{ENDED_KEPT}", 1) == ("error", [])
