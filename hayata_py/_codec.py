"""Durable value encoding: msgpack behind a one-byte format version.

Every value the store writes goes through :func:`encode` and every value it
reads through :func:`decode`. The encoded form is ``bytes([FORMAT_VERSION])``
followed by one msgpack object, so a later format can be introduced without
guessing what old bytes mean.

Guarantees:

* :func:`encode` either returns bytes that :func:`decode` turns back into an
  equal value (tuples come back as lists) or raises :class:`EncodingError`
  *before* anything is written; the error's message and ``details['key']``
  give the path of the offending value, e.g. ``state.customer.created_at``,
  ``state.items[2]`` or ``state['a key'].x`` (keys that are not names are
  quoted).
* :func:`decode` either returns a plain value or raises
  :class:`CorruptRecord` with ``details['record']`` and ``details['column']``
  naming where the bytes came from. It never returns a half-decoded value.

Encodable values: ``None``, ``bool``, ``int`` (64-bit signed or unsigned
range), ``float``, ``str``, ``bytes``, ``list``/``tuple`` and ``dict`` with
``str`` keys, nested to any depth below :data:`MAX_DEPTH`.
"""

from __future__ import annotations

from typing import Any

import msgpack

from hayata_py._errors import CorruptRecord, EncodingError

__all__ = ["FORMAT_VERSION", "MAX_DEPTH", "check_encodable", "decode", "encode"]

FORMAT_VERSION = 1
"""Version byte written in front of every encoded value."""

MAX_DEPTH = 256
"""Deepest nesting of lists/dicts accepted (msgpack's own limit is 512)."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_PREFIX = bytes([FORMAT_VERSION])


def _describe(value: object) -> str:
    return type(value).__qualname__


def _child_path(path: str, key: str) -> str:
    """``path.key`` for an ASCII name-like key, else ``path['any key']`` (unambiguous:
    some non-ASCII name characters look like punctuation)."""
    return f"{path}.{key}" if key.isascii() and key.isidentifier() else f"{path}[{key!r}]"


def _check_text(text: str, path: str) -> None:
    """Strings are stored as UTF-8: a lone surrogate (``"\\ud800"``) cannot be."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodingError(
            f"{path}: string {text[:40]!r} is not valid Unicode text ({exc.reason} at "
            f"index {exc.start}) and cannot be stored as UTF-8",
            key=path,
            type="str",
        ) from None


def _plainly_encodable(value: Any, depth: int = 0) -> bool:
    """True if ``value`` is made only of the exact encodable types (no
    subclasses) with ASCII text, within the depth limit: then it is
    encodable. False says nothing (a subclass, non-ASCII text, an error):
    :func:`check_encodable` then walks it with paths, to name what is wrong.
    About four times quicker than that walk, which builds every part's path."""
    kind = type(value)
    if kind is str:
        return bool(value.isascii())
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if value is None or kind is float or kind is bool or kind is bytes:
        return True
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str or not k.isascii() or not _plainly_encodable(v, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        for v in value:  # noqa: SIM110 - no generator frame per level, MAX_DEPTH deep
            if not _plainly_encodable(v, depth + 1):
                return False
        return True
    return False


def check_encodable(value: Any, key: str) -> None:
    """Raise :class:`EncodingError` naming the first unencodable path under ``key``.

    Walks ``value`` depth first; returns ``None`` if every part is encodable.
    """
    if not _plainly_encodable(value):
        _walk(value, key)


def _walk(value: Any, key: str) -> None:
    """:func:`check_encodable`'s walk of every part, with its path."""
    stack: list[tuple[Any, str, int]] = [(value, key, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, path)
            continue
        if item is None or isinstance(item, bool | float | bytes):
            continue
        if isinstance(item, int):
            if not _INT_MIN <= item <= _INT_MAX:
                raise EncodingError(
                    f"{path}: integer {item} is outside the 64-bit range msgpack can store",
                    key=path,
                    type=_describe(item),
                )
            continue
        if depth >= MAX_DEPTH:
            raise EncodingError(
                f"{path}: nesting deeper than {MAX_DEPTH} levels cannot be stored",
                key=path,
                type=_describe(item),
            )
        if isinstance(item, list | tuple):
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], f"{path}[{index}]", depth + 1))
            continue
        if isinstance(item, dict):
            children = []
            for k, v in item.items():
                if not isinstance(k, str):
                    raise EncodingError(
                        f"{path}: dict key {k!r} is a {_describe(k)}, only str keys can be stored",
                        key=path,
                        type=_describe(k),
                    )
                _check_text(k, path)
                children.append((v, _child_path(path, k), depth + 1))
            stack.extend(reversed(children))
            continue
        raise EncodingError(
            f"{path}: a value of type {_describe(item)} cannot be stored durably "
            "(allowed: None, bool, int, float, str, bytes, list, tuple, dict with str keys)",
            key=path,
            type=_describe(item),
        )


def encode(value: Any, *, key: str) -> bytes:
    """Encode ``value`` for durable storage; ``key`` names it in errors.

    Raises :class:`EncodingError` (``details['key']`` = path of the bad part)
    if any part of ``value`` is not encodable.
    """
    check_encodable(value, key)
    try:
        packed: bytes = msgpack.packb(value, use_bin_type=True, strict_types=False)
    except (TypeError, ValueError, OverflowError) as exc:  # pragma: no cover - pre-checked
        raise EncodingError(f"{key}: {exc}", key=key) from exc
    return _PREFIX + packed


def _reject_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"unexpected msgpack extension type {code}")


def decode(data: bytes, *, record: str, column: str) -> Any:
    """Decode bytes written by :func:`encode`.

    Raises :class:`CorruptRecord` naming ``record`` and ``column`` if the bytes
    are empty, carry an unknown format version, or are not exactly one valid
    msgpack value of the encodable kinds.
    """
    where = f"{record}, column {column}"
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) == 0:
        raise CorruptRecord(
            f"{where}: no encoded value (got {_describe(data)})", record=record, column=column
        )
    raw = bytes(data)
    if raw[0] != FORMAT_VERSION:
        raise CorruptRecord(
            f"{where}: unknown value format version {raw[0]} "
            f"(this hayata_py reads version {FORMAT_VERSION})",
            record=record,
            column=column,
        )
    try:
        value = msgpack.unpackb(
            raw[1:], raw=False, use_list=True, strict_map_key=True, ext_hook=_reject_ext
        )
        check_encodable(value, column)
    except Exception as exc:
        raise CorruptRecord(
            f"{where}: stored bytes cannot be decoded ({type(exc).__name__}: {exc or 'invalid'})",
            record=record,
            column=column,
        ) from exc
    return value
