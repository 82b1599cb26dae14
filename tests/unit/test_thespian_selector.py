"""The transport's reused selector (``supervisors/_speed.py``
``install_selector_patch``): it fits the installed Thespian and it keeps the
``selectors`` semantics Thespian's loop relies on. That actor processes run it:
``tests/supervisors/test_thespian_patches_in_processes.py``."""

from __future__ import annotations

import errno
import os
import selectors
import socket
import time
from collections.abc import Sequence
from typing import Any

import pytest
import thespian.system.transport.TCPTransport as tcp

from supervisors import _speed as T

pytestmark = pytest.mark.timeout(60)


def test_the_patch_fits_the_installed_thespian_and_is_applied() -> None:
    # Fails when Thespian changes the code the patch stands in for: re-read
    # TCPTransport._runWithExpiry and _check_fd, then update SELECTOR_PATCH_FITS.
    assert T.selector_patch_fingerprint() == T.SELECTOR_PATCH_FITS
    assert tcp.selectors is T._SELECTORS_SHIM
    assert T.install_selector_patch() is True


@pytest.fixture
def pair() -> Any:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def _turn(timeout: float | None, reads: Sequence[Any] = (), writes: Sequence[Any] = ()
          ) -> dict[int, int]:
    """One turn as Thespian's loop makes it: new, register, select, close."""
    sel = tcp.selectors.DefaultSelector()
    for each in reads:
        sel.register(each, tcp.selectors.EVENT_READ)
    for each in writes:
        sel.register(each, tcp.selectors.EVENT_WRITE)
    events = sel.select(timeout)
    sel.close()
    return {key.fd: ev for key, ev in events}


def test_readable_writable_and_nothing_ready(pair: Any) -> None:
    a, b = pair
    assert _turn(0, reads=[a.fileno()]) == {}
    b.send(b"x")
    assert _turn(0, reads=[a.fileno()]) == {a.fileno(): selectors.EVENT_READ}
    assert _turn(0, writes=[b.fileno()]) == {b.fileno(): selectors.EVENT_WRITE}
    # the same descriptor registered only for writing in a later turn: no read event
    assert _turn(0, writes=[a.fileno()]) == {a.fileno(): selectors.EVENT_WRITE}
    # dropped from the turn: not reported although still readable
    assert _turn(0, writes=[b.fileno()]) == {b.fileno(): selectors.EVENT_WRITE}


def test_timeout_waits_at_least_the_delay(pair: Any) -> None:
    a, _b = pair
    t0 = time.monotonic()
    assert _turn(0.05, reads=[a.fileno()]) == {}
    assert time.monotonic() - t0 >= 0.05


def test_a_reused_descriptor_number_is_polled_as_the_new_socket(pair: Any) -> None:
    a, _b = pair
    c, d = socket.socketpair()
    number = c.fileno()
    assert _turn(0, reads=[a.fileno(), number]) == {}
    c.close()
    d.close()
    e, f = socket.socketpair()  # lowest free numbers: e takes c's
    try:
        assert e.fileno() == number
        f.send(b"y")
        assert _turn(1.0, reads=[a.fileno(), e.fileno()]) == {number: selectors.EVENT_READ}
    finally:
        e.close()
        f.close()


def test_hangup_is_reported_as_readable(pair: Any) -> None:
    a, b = pair
    b.close()
    assert _turn(0, reads=[a.fileno()])[a.fileno()] & selectors.EVENT_READ


def test_a_closed_descriptor_raises_ebadf_like_epoll(pair: Any) -> None:
    a, _b = pair
    c, d = socket.socketpair()
    number = c.fileno()
    c.close()
    d.close()
    with pytest.raises(OSError) as info:
        _turn(0, reads=[a.fileno(), number])
    assert info.value.errno == errno.EBADF
    tcp.TCPTransport._check_fd(a.fileno())  # a good one passes
    with pytest.raises(OSError):
        tcp.TCPTransport._check_fd(number)
    assert _turn(0, reads=[a.fileno()]) == {}  # the next turn forgets the bad one


def test_registration_errors_match_selectors(pair: Any) -> None:
    a, _b = pair
    sel = tcp.selectors.DefaultSelector()
    sel.register(a.fileno(), selectors.EVENT_READ)
    with pytest.raises(KeyError):
        sel.register(a, selectors.EVENT_WRITE)  # a file object: same descriptor
    with pytest.raises(ValueError):
        sel.register(-1, selectors.EVENT_READ)
    with pytest.raises(ValueError):
        sel.register(a.fileno() + 1000, 0)
    sel.close()


def test_each_thread_has_its_own_poll_set() -> None:
    import threading

    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(tcp.selectors.DefaultSelector()))
    thread.start()
    thread.join(10)
    assert seen and seen[0] is not tcp.selectors.DefaultSelector()


# -- identify() built only when formatted (install_describe_patch) ------------------------

IDENTIFY_CALL_SITES = "07f457532fab"
"""Hash of every line of Thespian that calls ``identify()``: each passes the
result to a ``%s`` (thesplog, logging, ``'... %s' %``), which is what lets it
be an object that builds its text when formatted. If this changes, read the new
call sites before updating it."""


def _identify_call_sites() -> str:
    import hashlib

    import thespian

    root = os.path.dirname(thespian.__file__)
    sites = []
    for folder, _dirs, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    sites += [line.strip() for line in f if "identify()" in line]
    return hashlib.sha256("\n".join(sites).encode()).hexdigest()[:12]


def test_the_describe_patch_fits_the_installed_thespian_and_is_applied() -> None:
    from thespian.system.transport import ReceiveEnvelope, TransmitIntent

    assert T.describe_patch_fingerprint() == T.DESCRIBE_PATCH_FITS
    assert _identify_call_sites() == IDENTIFY_CALL_SITES
    assert T.install_describe_patch() is True
    assert getattr(TransmitIntent.identify, "_supervisors_patched", False)
    assert getattr(ReceiveEnvelope.identify, "_supervisors_patched", False)


class Counted:
    """A message whose text counts how often it was built."""

    built = 0

    def __str__(self) -> str:
        Counted.built += 1
        return "counted-message"


def test_identify_text_is_built_only_when_formatted() -> None:
    import logging

    from thespian.system.transport import ReceiveEnvelope, TransmitIntent
    from thespian.system.utilis import thesplog

    Counted.built = 0
    envelope = ReceiveEnvelope("sender-addr", Counted())
    intent = TransmitIntent("target-addr", Counted())
    thesplog("ACTOR got %s", envelope.identify(), level=logging.DEBUG)
    thesplog("Attempting intent %s", intent.identify(), level=logging.DEBUG)
    assert Counted.built == 0  # debug is off: nothing was built
    text = "%s" % envelope.identify()  # noqa: UP031 - as Thespian formats it
    assert "from: sender-addr" in text and "counted-message" in text
    assert str(envelope) == text  # str() still gives the text itself
    assert isinstance(str(envelope), str)
    as_logged = "%s" % intent.identify()  # noqa: UP031 - as Thespian formats it
    assert "target-addr" in as_logged and "counted-message" in str(intent)
    assert Counted.built >= 4  # built each time it is formatted
