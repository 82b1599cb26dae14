"""Unit tests for hayata_py._codec (no database)."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hayata_py._codec import (
    FORMAT_VERSION,
    MAX_DEPTH,
    _plainly_encodable,
    _walk,
    check_encodable,
    decode,
    encode,
)
from hayata_py._errors import CorruptRecord, EncodingError

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def _listify(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_listify(v) for v in value]
    if isinstance(value, dict):
        return {k: _listify(v) for k, v in value.items()}
    return value


@given(values)
def test_roundtrip(value: Any) -> None:
    """Every encodable value decodes to an equal value (tuples as lists)."""
    assert decode(encode(value, key="v"), record="r", column="c") == _listify(value)


@given(values)
def test_encoded_bytes_start_with_format_version(value: Any) -> None:
    """Encoded bytes carry the format version as their first byte."""
    assert encode(value, key="v")[0] == FORMAT_VERSION


def test_nan_roundtrips() -> None:
    """NaN survives encoding (compared with isnan)."""
    assert math.isnan(decode(encode(float("nan"), key="v"), record="r", column="c"))


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"customer": {"created_at": object()}}, "state.customer.created_at"),
        ({"items": [1, 2, {1, 2}]}, "state.items[2]"),
        ({"n": 2**64}, "state.n"),
        ({"n": -(2**63) - 1}, "state.n"),
        ({"m": {1: "x"}}, "state.m"),
        (object(), "state"),
        ([(1, 2j)], "state[0][1]"),
    ],
)
def test_encoding_error_names_path(value: Any, path: str) -> None:
    """An unencodable value raises EncodingError whose key and message name its path."""
    with pytest.raises(EncodingError) as info:
        encode(value, key="state")
    assert info.value.details["key"] == path
    assert path in str(info.value)
    assert info.value.code == "unencodable_value"


def test_check_encodable_accepts_valid() -> None:
    """check_encodable returns None for encodable values."""
    check_encodable({"a": [1, 2.5, "x", b"y", None, True]}, "k")


anything = st.recursive(
    scalars | st.integers() | st.complex_numbers() | st.sets(st.integers(), max_size=2)
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=4) | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(anything)
def test_the_quick_check_accepts_only_what_the_full_walk_accepts(value: Any) -> None:
    """check_encodable's quick pass (exact types, ASCII text) never lets through a
    value the walk with paths refuses; what it does not accept goes to that walk."""
    if _plainly_encodable(value):
        _walk(value, "v")  # must not raise
    try:
        _walk(value, "v")
    except EncodingError:
        with pytest.raises(EncodingError):
            check_encodable(value, "v")


class _Text(str):
    pass


class _Int(int):
    pass


@pytest.mark.parametrize("value", [
    [True, 1, 2.5, None, b"x"], {"k": (1, "a")}, 2**64 - 1, -(2**63)])
def test_plain_values_pass_the_quick_check(value: Any) -> None:
    assert _plainly_encodable(value)
    check_encodable(value, "v")


@pytest.mark.parametrize("value", [{"k": _Text("x")}, {"é": "ü"}, ["ü"], {"n": _Int(3)}])
def test_values_the_quick_check_leaves_to_the_walk_are_still_accepted(value: Any) -> None:
    assert not _plainly_encodable(value)
    check_encodable(value, "v")


@pytest.mark.parametrize("value", [{"k": "\ud800"}, {"\udfff": 1}, [2**64], {1: "x"}])
def test_values_the_quick_check_refuses_are_refused_by_the_walk(value: Any) -> None:
    assert not _plainly_encodable(value)
    with pytest.raises(EncodingError):
        check_encodable(value, "v")


def test_too_deep_is_refused() -> None:
    """Nesting beyond MAX_DEPTH raises EncodingError instead of crashing msgpack."""
    value: Any = 1
    for _ in range(MAX_DEPTH + 1):
        value = [value]
    with pytest.raises(EncodingError):
        encode(value, key="deep")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x07" + msgpack.packb(1),
        b"\x01\xc1",
        b"\x01",
        b"\x01" + msgpack.packb(1) + b"extra",
        b"\x01" + msgpack.packb({1: 2}),
        b"\x01" + msgpack.packb(msgpack.ExtType(5, b"x")),
        b"\x01" + msgpack.packb(msgpack.Timestamp(1, 0)),
        b"\x01\xdb\xff\xff\xff\xff",
    ],
)
def test_garbage_is_corrupt_record(data: bytes) -> None:
    """Undecodable bytes raise CorruptRecord naming the record and column."""
    with pytest.raises(CorruptRecord) as info:
        decode(data, record="invocation inv-1", column="state")
    assert info.value.details == {"record": "invocation inv-1", "column": "state"}
    assert "invocation inv-1" in str(info.value) and "state" in str(info.value)


@given(st.binary())
def test_arbitrary_bytes_decode_or_corrupt(data: bytes) -> None:
    """Arbitrary bytes either decode to an encodable value or raise CorruptRecord."""
    try:
        value = decode(data, record="r", column="c")
    except CorruptRecord:
        return
    check_encodable(value, "c")
