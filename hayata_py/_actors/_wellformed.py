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
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

from thespian.actors import ActorAddress

__all__ = ["bad_field"]

_ADDRESS_FIELDS = frozenset({"agent", "address", "watcher", "subscriber", "reply_to"})
_MAY_BE_NONE = frozenset({("EdgeInit", "watcher"), ("NodeEvent", "address"),
                          ("WatchNodes", "subscriber")})
"""The address fields that may hold None (no watcher yet, a node that is down)."""
_PROTOCOL = "hayata_py._actor_messages"
_DEPTH = 4


def bad_field(message: Any) -> str | None:
    """The name of the first field of ``message`` that does not match its type
    (a runtime message dataclass), or None if it is well formed or no such
    message."""
    return _bad_field(message, 0)


Check = Callable[[Any], bool]
"""A compiled check of one value against one annotation."""


def _bad_field(message: Any, depth: int) -> str | None:
    checks = _classes.get((type(message), depth))
    if checks is None:
        checks = _class_checks(type(message), depth)
    for name, check in checks:
        try:
            value = getattr(message, name)
        except AttributeError:
            return name
        if not check(value):
            return name
    return None


_classes: dict[tuple[type, int], tuple[tuple[str, Check], ...]] = {}
"""(class, depth) -> each field's name and check, built once per class: the
annotations are read and turned into closures the first time a message of a
class is checked, so a message costs one call per field, not a walk of its
annotations."""
_checks: dict[tuple[Any, int], Check] = {}


def _class_checks(cls: type, depth: int) -> tuple[tuple[str, Check], ...]:
    if not dataclasses.is_dataclass(cls) or not cls.__module__.startswith("hayata_py."):
        found: tuple[tuple[str, Check], ...] = ()
    else:
        found = tuple((name, _field_check(cls, name, hint, depth))
                      for name, hint in _fields(cls))
    _classes[(cls, depth)] = found
    return found


def _field_check(cls: type, name: str, hint: Any, depth: int) -> Check:
    if name in _ADDRESS_FIELDS and cls.__module__ == _PROTOCOL and hint is Any:
        if (cls.__name__, name) in _MAY_BE_NONE:
            return lambda v: v is None or isinstance(v, ActorAddress)
        return lambda v: isinstance(v, ActorAddress)
    return _check(hint, depth)


def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve: check nothing
        hints = {}
    return tuple((f.name, hints.get(f.name, Any)) for f in dataclasses.fields(cls))


def _always(value: Any) -> bool:
    return True


def _check(hint: Any, depth: int) -> Check:
    """The check of ``hint`` at ``depth`` (built once; annotations are hashable)."""
    try:
        found = _checks.get((hint, depth))
    except TypeError:  # an unhashable annotation: built each time, not kept
        return _build(hint, depth)
    if found is None:
        found = _checks[(hint, depth)] = _build(hint, depth)
    return found


def _build(hint: Any, depth: int) -> Check:
    if hint is Any or depth > _DEPTH:
        return _always
    if hint is type(None) or hint is None:
        return lambda v: v is None
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is Union or origin is types.UnionType:
        alternatives = tuple(_check(a, depth) for a in args)
        return lambda v: any(c(v) for c in alternatives)
    if origin is Literal:
        return lambda v: v in args
    if origin is None:
        return _plain(hint, depth)
    if origin is typing.Annotated:
        return _check(args[0], depth)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            each = _check(args[0], depth + 1)
            return lambda v: isinstance(v, tuple) and all(map(each, v))
        positions = tuple(_check(a, depth + 1) for a in args)
        return lambda v: isinstance(v, tuple) and len(v) == len(positions) and all(
            c(x) for c, x in zip(positions, v, strict=True))
    if origin in (list, cabc.Sequence, cabc.MutableSequence):
        return _items((list,) if origin is list else (list, tuple), args, depth)
    if origin in (set, frozenset, cabc.Set, cabc.Collection, cabc.Iterable):
        return _items((set, frozenset, list, tuple), args, depth)
    if origin in (dict, cabc.Mapping, cabc.MutableMapping):
        if len(args) != 2:
            return lambda v: isinstance(v, cabc.Mapping)
        key, val = _check(args[0], depth + 1), _check(args[1], depth + 1)
        return lambda v: isinstance(v, cabc.Mapping) and all(
            key(k) and val(x) for k, x in v.items())
    if isinstance(origin, type):
        return lambda v: isinstance(v, origin)
    return _always


def _plain(hint: Any, depth: int) -> Check:
    if hint is float:
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if hint is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if not isinstance(hint, type):
        return _always  # a TypeVar, a string we could not resolve: not checked
    if dataclasses.is_dataclass(hint):
        return lambda v: isinstance(v, hint) and (
            isinstance(v, enum.Enum) or _bad_field(v, depth + 1) is None)
    return lambda v: isinstance(v, hint)


def _items(kinds: tuple[type, ...], args: tuple[Any, ...], depth: int) -> Check:
    if not args:
        return lambda v: isinstance(v, kinds)
    each = _check(args[0], depth + 1)
    return lambda v: isinstance(v, kinds) and all(
        map(each, typing.cast("cabc.Iterable[Any]", v)))


def drop_malformed(log: Any, message: Any) -> bool:
    """True (and logged) if ``message`` is malformed: the actor must ignore it."""
    field = bad_field(message)
    if field is None:
        return False
    log.warning("bad_message", message=type(message).__name__, field=field)
    return True
