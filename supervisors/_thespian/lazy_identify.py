"""Thespian's debug text of a message built only when it is logged.

Thespian passes ``intent.identify()`` / ``envelope.identify()`` (the
message's ``str``, the addresses) to a debug ``thesplog`` on every send and
receive, so the text is built whether or not debug logging is on. The
``lazy_identify`` patch makes ``identify()`` return a :class:`Described`,
which builds that text when something formats it. Every caller of
``identify()`` in Thespian only formats it with ``%s`` (pinned by
``tests/test_thespian_selector.py``); ``str(envelope)``, which Thespian
defines as ``identify()``, stays the text itself (:data:`ENVELOPE_STR`).
"""

from __future__ import annotations

from typing import Any

from thespian.system.transport import ReceiveEnvelope, TransmitIntent

__all__ = ["ENVELOPE_STR", "Described", "envelope_identify", "transmit_identify"]

_TRANSMIT_TEXT = TransmitIntent.identify
_ENVELOPE_TEXT = ReceiveEnvelope.identify
"""Thespian's own ``identify()`` methods, as imported (the patch replaces them)."""


class Described:
    """The text ``identify()`` gave, built when something formats it."""

    __slots__ = ("_of", "_text")

    def __init__(self, of: Any, text: Any) -> None:
        self._of, self._text = of, text

    def __str__(self) -> str:
        return str(self._text(self._of))

    __repr__ = __str__


def transmit_identify(self: Any) -> Described:
    """``TransmitIntent.identify``, built when formatted."""
    return Described(self, _TRANSMIT_TEXT)


def envelope_identify(self: Any) -> Described:
    """``ReceiveEnvelope.identify``, built when formatted."""
    return Described(self, _ENVELOPE_TEXT)


ENVELOPE_STR = _ENVELOPE_TEXT
"""``ReceiveEnvelope.__str__``: Thespian's ``identify()`` text itself."""
