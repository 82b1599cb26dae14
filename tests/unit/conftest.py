"""Every test in tests/unit runs under the guard of ``tests/unit/guard.py``: a
test that starts a process or reaches the database server, in its fixtures'
setup, its body or its teardown, fails, even if the code under test caught
the refusal. One teardown runs unguarded: that of the last test of a session
(or of a pytest-xdist worker), which also ends the session's fixtures."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.unit.guard import Guard, guarded

GUARD = pytest.StashKey[Guard]()


def _phase(item: pytest.Item) -> Generator[None, None, None]:
    guard = item.stash.setdefault(GUARD, Guard())
    try:
        with guarded(guard):
            yield
    except BaseException:
        guard.refused.clear()  # the phase failed already, on the refusal itself if any
        raise
    guard.check()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    yield from _phase(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _phase(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, None, None]:
    if nextitem is None:
        # The session's last test also ends the session's fixtures, among them
        # the PostgreSQL server and databases that the other layers' tests used.
        yield
        return
    yield from _phase(item)


@pytest.fixture
def unit_guard(request: pytest.FixtureRequest) -> Guard:
    """This test's guard (the guard's own tests read and clear what it refused)."""
    node: pytest.Item = request.node
    return node.stash[GUARD]
