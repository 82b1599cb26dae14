"""Which code of Thespian a patch was written against, and its fingerprint.

A patch is written against some functions of Thespian: the ones it replaces,
or the ones that use what it replaces. Its *fingerprint* is a hash of their
source text as installed; :mod:`supervisors._thespian.installer` compares it
with the one recorded in :mod:`supervisors._thespian.patch_table` before it
installs the patch.

A function's source is read from its file with ``linecache`` (its decorators,
its ``def`` line and every line indented deeper after it), not with
``inspect.getsource``, which tokenizes and takes ~10 ms on
``TCPTransport._runWithExpiry``: this runs at every import of
``supervisors``. A property's source is its getter's; an attribute that is
absent, or is not Python code, has the empty source.

Once a patch has replaced an attribute, the attribute holds the replacement.
:func:`remember_original` keeps Thespian's own object first, so the
fingerprint (:func:`fingerprint`) reads Thespian's source even after the
patch is in force.
"""

from __future__ import annotations

import hashlib
import importlib
import linecache
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Place", "fingerprint", "remember_original", "source_of", "thespian_object"]


@dataclass(frozen=True)
class Place:
    """An attribute of Thespian: a ``module`` and the dotted ``attribute`` in it
    (``TCPTransport._runWithExpiry``: a method of a class; ``selectors``: a
    name of the module itself)."""

    module: str
    attribute: str

    def owner(self) -> Any:
        """The module or class that holds the attribute."""
        owner: Any = sys.modules.get(self.module) or importlib.import_module(self.module)
        for part in self.attribute.split(".")[:-1]:
            owner = getattr(owner, part)
        return owner

    @property
    def name(self) -> str:
        return self.attribute.rpartition(".")[2]

    def get(self) -> Any:
        """What the attribute holds now (None if absent)."""
        return getattr(self.owner(), self.name, None)

    def set(self, value: Any) -> None:
        setattr(self.owner(), self.name, value)

    def __str__(self) -> str:
        return f"{self.module}.{self.attribute}"


_ORIGINALS: dict[Place, Any] = {}
"""Thespian's own object at each place a patch replaced (None: it had none)."""


def remember_original(place: Place) -> None:
    """Keep what ``place`` holds now as Thespian's own, unless already kept."""
    if place not in _ORIGINALS:
        _ORIGINALS[place] = place.get()


def thespian_object(place: Place) -> Any:
    """Thespian's own object at ``place``: the one a patch replaced, or what is there."""
    return _ORIGINALS[place] if place in _ORIGINALS else place.get()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def source_of(obj: Any) -> str:
    """The source lines of the function ``obj`` (see the module's text)."""
    fn = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    lines = linecache.getlines(code.co_filename)
    start = code.co_firstlineno - 1
    if not 0 <= start < len(lines):
        return ""
    indent = _indent(lines[start])
    end = start
    while end < len(lines) - 1 and lines[end].lstrip().startswith("@"):
        end += 1  # co_firstlineno is the first decorator's line
    end += 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    return "".join(lines[start:end])


def fingerprint(places: Iterable[Place]) -> str:
    """A hash of the source of Thespian's own object at each of ``places``, in order."""
    text = "\0".join(source_of(thespian_object(place)) for place in places)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
