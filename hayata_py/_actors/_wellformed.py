"""Is a message well formed? The one check each actor makes before it handles one.

Actors trust the shape of the runtime's own messages (a field typed
``tuple[EdgeRef, ...]`` is iterated as one). A message of the right class
with wrong fields (garbage on the wire, a message of another version) would
raise inside a handler, and an exception in a handler fails the actor (its
supervisor restarts it, and a restarted agent interrupts its invocation). So
every actor first asks :func:`bad_field`: a message whose fields do not match
their annotations is logged and dropped, and changes nothing.

The check follows the dataclass annotations (``int``, ``str``, ``float``,
``bool``, enums, ``X | None``, ``tuple[X, ...]``, ``list[X]``, ``dict[K, V]``,
nested message dataclasses), a few levels deep; ``Any`` accepts anything,
except that a protocol field that holds an actor address (``agent``,
``address``, ``watcher``, ``subscriber``) must hold one. No Thespian import
here beyond the address class.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import enum
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from thespian.actors import ActorAddress

__all__ = ["bad_field"]

_ADDRESS_FIELDS = frozenset({"agent", "address", "watcher", "subscriber", "reply_to"})
_MAY_BE_NONE = frozenset({("EdgeInit", "watcher"), ("NodeEvent", "address"),
                          ("WatchNodes", "subscriber")})
"""The address fields that may hold None (no watcher yet, a node that is down)."""
_PROTOCOL = "hayata_py._actors._protocol"
_DEPTH = 4
_hints: dict[type, tuple[tuple[str, Any], ...]] = {}


def bad_field(message: Any) -> str | None:
    """The name of the first field of ``message`` that does not match its type
    (a runtime message dataclass), or None if it is well formed or no such
    message."""
    return _bad_field(message, 0)


def _bad_field(message: Any, depth: int) -> str | None:
    cls = type(message)
    if not dataclasses.is_dataclass(cls) or not cls.__module__.startswith("hayata_py."):
        return None
    for name, hint in _fields(cls):
        try:
            value = getattr(message, name)
        except AttributeError:
            return name
        if name in _ADDRESS_FIELDS and cls.__module__ == _PROTOCOL and hint is Any:
            if not isinstance(value, ActorAddress) and not (
                    value is None and (cls.__name__, name) in _MAY_BE_NONE):
                return name
            continue
        if not _matches(value, hint, depth):
            return name
    return None


def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    found = _hints.get(cls)
    if found is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # noqa: BLE001 - an annotation we cannot resolve: check nothing
            hints = {}
        found = tuple((f.name, hints.get(f.name, Any)) for f in dataclasses.fields(cls))
        _hints[cls] = found
    return found


def _matches(value: Any, hint: Any, depth: int) -> bool:
    if hint is Any or depth > _DEPTH:
        return True
    if hint is type(None) or hint is None:
        return value is None
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is Union or origin is types.UnionType:
        return any(_matches(value, a, depth) for a in args)
    if origin is Literal:
        return value in args
    if origin is None:
        if hint is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if hint is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if isinstance(hint, type):
            if not isinstance(value, hint):
                return False
            if dataclasses.is_dataclass(hint) and not isinstance(value, enum.Enum):
                return _bad_field(value, depth + 1) is None
            return True
        return True  # a TypeVar, a string we could not resolve: not checked
    if origin is typing.Annotated:
        return _matches(value, args[0], depth)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0], depth + 1) for v in value)
        return len(args) == len(value) and all(
            _matches(v, a, depth + 1) for v, a in zip(value, args, strict=True))
    if origin in (list, cabc.Sequence, cabc.MutableSequence):
        kinds: tuple[type, ...] = (list,) if origin is list else (list, tuple)
        if not isinstance(value, kinds):
            return False
        items = typing.cast("cabc.Iterable[Any]", value)
        return not args or all(_matches(v, args[0], depth + 1) for v in items)
    if origin in (set, frozenset, cabc.Set, cabc.Collection, cabc.Iterable):
        if not isinstance(value, (set, frozenset, list, tuple)):
            return False
        return not args or all(_matches(v, args[0], depth + 1) for v in value)
    if origin in (dict, cabc.Mapping, cabc.MutableMapping):
        if not isinstance(value, cabc.Mapping):
            return False
        if len(args) != 2:
            return True
        return all(_matches(k, args[0], depth + 1) and _matches(v, args[1], depth + 1)
                   for k, v in value.items())
    return isinstance(value, origin) if isinstance(origin, type) else True


def drop_malformed(log: Any, message: Any) -> bool:
    """True (and logged) if ``message`` is malformed: the actor must ignore it."""
    field = bad_field(message)
    if field is None:
        return False
    log.warning("bad_message", message=type(message).__name__, field=field)
    return True
