"""torrents.bencoding: round trips, limits, and nothing but BencodeError on bad input."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings, strategies as st

from torrents import bencoding
from torrents.bencoding import Limits, decode, dict_value_span, encode
from torrents.errors import BencodeError, BtswarmError

FAST = settings(max_examples=100, deadline=None)

leaves = st.integers(min_value=-(10**30), max_value=10**30) | st.binary(max_size=40)
values = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.binary(max_size=10), children, max_size=5),
    max_leaves=30,
)


def depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def error_of(data: bytes, limits: Limits = bencoding.DEFAULT_LIMITS) -> str:
    with pytest.raises(BencodeError) as info:
        decode(data, limits)
    return str(info.value)


# round trips

@FAST
@given(values)
def test_decode_inverts_encode(value):
    assert depth(value) <= 32
    assert decode(encode(value)) == value


@FAST
@given(values)
def test_encoding_is_canonical(value):
    data = encode(value)
    assert encode(decode(data)) == data


def test_known_encodings():
    assert encode(0) == b"i0e"
    assert encode(-42) == b"i-42e"
    assert encode(b"") == b"0:"
    assert encode("héllo") == b"6:h\xc3\xa9llo"
    assert encode([1, b"a", [b"b"]]) == b"li1e1:al1:bee"
    assert encode({b"zz": 1, b"a": {b"y": b"", b"b": []}}) == b"d1:ad1:ble1:y0:e2:zzi1ee"
    assert decode(b"d1:ad1:ble1:y0:e2:zzi1ee") == {b"a": {b"b": [], b"y": b""}, b"zz": 1}


def test_decode_keeps_strings_as_bytes():
    assert decode(b"l4:spam3:\xff\x00\x01e") == [b"spam", b"\xff\x00\x01"]


def test_decode_accepts_unsorted_keys():
    # BEP 3 wants sorted keys, but real files are not all canonical; they must still be read
    assert decode(b"d1:bi2e1:ai1ee") == {b"a": 1, b"b": 2}


@pytest.mark.parametrize("value, culprit", [(1.5, "float"), (None, "NoneType"), ({b"k": [set()]}, "set")])
def test_encode_refuses_unsupported_types(value, culprit):
    with pytest.raises(BencodeError) as info:
        encode(value)
    assert str(info.value) == f"bencode: cannot encode a value of type {culprit}"


# malformed input

@pytest.mark.parametrize("data, message", [
    (b"", "bencode: empty input"),
    (b"i03e", "bencode: bad integer at byte 0"),
    (b"i-0e", "bencode: bad integer at byte 0"),
    (b"i-03e", "bencode: bad integer at byte 0"),
    (b"ie", "bencode: bad integer at byte 0"),
    (b"i-e", "bencode: bad integer at byte 0"),
    (b"i1.5e", "bencode: bad integer at byte 0"),
    (b"i" + b"9" * 65 + b"e", "bencode: bad integer at byte 0"),
    (b"i12", "bencode: unterminated integer at byte 0"),
    (b"i1ei2e", "bencode: 3 bytes of trailing data after byte 3"),
    (b"4:spam\n", "bencode: 1 bytes of trailing data after byte 6"),
    (b"5:spam", "bencode: string at byte 2 runs past the end"),
    (b"99999999999999999999:x", "bencode: string at byte 21 runs past the end"),
    (b"03:abc", "bencode: bad string length at byte 0"),
    (b"4spam", "bencode: bad string length at byte 0"),
    (b"l4:spam", "bencode: truncated at byte 7"),
    (b"d3:key", "bencode: truncated at byte 6"),
    (b"e", "bencode: unexpected 'e' at byte 0"),
    (b"x", "bencode: unexpected byte 0x78 at byte 0"),
    (b"di1ei2ee", "bencode: dictionary key at byte 1 is not a string"),
    (b"dlei2ee", "bencode: dictionary key at byte 1 is not a string"),
    (b"d1:ae", "bencode: dictionary key without a value at byte 4"),
    (b"d1:ai1e1:ai2ee", "bencode: duplicate dictionary key b'a' at byte 7"),
    (b"ld1:xi1eed1:xi1e1:xi2eee", "bencode: duplicate dictionary key b'x' at byte 16"),
])
def test_malformed_input_is_refused_with_its_offset(data, message):
    assert error_of(data) == message


def test_not_bytes_is_refused():
    with pytest.raises(BencodeError) as info:
        decode("i1e")  # type: ignore[arg-type]
    assert str(info.value) == "bencode: expected bytes, got str"


def test_subject_names_the_source():
    with pytest.raises(BencodeError) as info:
        decode(b"i03e", subject="site1.torrent")
    assert str(info.value) == "site1.torrent: bad integer at byte 0"
    assert info.value.subject == "site1.torrent"
    assert info.value.problem == "bad integer at byte 0"


def test_bytearray_and_memoryview_are_accepted():
    assert decode(bytearray(b"li1ee")) == [1]
    assert decode(memoryview(b"3:abc")) == b"abc"


# limits

def test_100000_nested_lists_are_a_clean_error_not_recursion():
    data = b"l" * 100_000 + b"e" * 100_000
    assert error_of(data) == "bencode: nested deeper than 32 at byte 32"


def test_nesting_up_to_the_limit_decodes():
    data = b"l" * 32 + b"e" * 32
    value = decode(data)
    assert depth(value) == 32
    assert error_of(b"l" * 33 + b"e" * 33) == "bencode: nested deeper than 32 at byte 32"
    assert error_of(b"d1:a" * 3 + b"i1e" + b"e" * 3, Limits(max_depth=2)) == "bencode: nested deeper than 2 at byte 8"


def test_size_limit():
    data = encode(b"x" * 1000)
    assert decode(data, Limits(max_size=len(data))) == b"x" * 1000
    n = len(data)
    assert error_of(data, Limits(max_size=n - 1)) == f"bencode: {n} bytes is over the limit of {n - 1}"


def test_token_limit():
    data = b"l" + b"i1e" * 10 + b"e"  # 11 values and the closing 'e'
    assert decode(data, Limits(max_tokens=12)) == [1] * 10
    assert error_of(data, Limits(max_tokens=11)) == "bencode: more than 11 values"


def test_default_limits():
    # 64 MiB covers a .torrent of any real dataset; the token limit is checked above with a small value
    assert bencoding.DEFAULT_LIMITS == Limits(max_size=64 * 1024 * 1024, max_depth=32, max_tokens=2_000_000)
    data = b"l" + b"0:" * 200_000 + b"e"
    assert error_of(data, Limits(max_tokens=200_000)) == "bencode: more than 200000 values"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_bencode_error(data):
    try:
        decode(data)
    except BencodeError:
        pass


prefixes = st.sampled_from([b"d", b"l", b"i", b"e", b"0:", b"1:", b"4:info", b"i-", b"i0", b":", b"-", b"9"])


@settings(max_examples=200, deadline=None)
@given(st.lists(prefixes | st.binary(max_size=3), max_size=40).map(b"".join))
def test_bencode_shaped_noise_raises_only_bencode_error(data):
    try:
        value = decode(data)
    except BencodeError:
        return
    assert decode(encode(value)) == value


@settings(max_examples=150, deadline=None)
@given(values, st.data())
def test_mutated_encodings_raise_only_bencode_error(value, data):
    raw = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.sampled_from(b"deil0123456789:-x"))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        decode(bytes(raw[:cut]))
    except BencodeError:
        pass


def test_bencode_error_is_a_btswarm_error():
    assert issubclass(BencodeError, BtswarmError)


# dict_value_span: the info-hash is taken from the exact bytes in the file

def test_dict_value_span_returns_the_exact_value_bytes():
    info = b"d5:filesld6:lengthi1e4:pathl1:aeee4:name2:ds12:piece lengthi16384e6:pieces20:" + b"\x01" * 20 + b"e"
    data = b"d8:announce3:url4:info" + info + b"3:zzzi1ee"
    start, end = dict_value_span(data, b"info")
    assert data[start:end] == info
    assert hashlib.sha1(data[start:end]).hexdigest() == hashlib.sha1(info).hexdigest()


def test_dict_value_span_keeps_non_canonical_order_inside_the_value():
    info = b"d4:name2:ds1:ai1ee"  # unsorted: re-encoding would change the hash
    data = b"d4:zzzz0:4:info" + info + b"1:ai0ee"
    decode(data)
    start, end = dict_value_span(data, b"info")
    assert data[start:end] == info
    assert encode(decode(info)) != info


def test_dict_value_span_absent_key_and_non_dict():
    assert dict_value_span(b"d1:ai1ee", b"info") is None
    assert dict_value_span(b"de", b"info") is None
    assert dict_value_span(b"l4:infoe", b"info") is None


@FAST
@given(st.dictionaries(st.binary(max_size=8), values, min_size=1, max_size=6), st.data())
def test_dict_value_span_matches_encoding_of_each_value(top, data):
    encoded = encode(top)
    key = data.draw(st.sampled_from(sorted(top)))
    start, end = dict_value_span(encoded, key)
    assert encoded[start:end] == encode(top[key])


def test_decode_with_span_finds_the_same_span_in_one_pass():
    info = b"d5:filesld6:lengthi1e4:pathl1:aeee4:name2:ds12:piece lengthi16384e6:pieces20:" + b"\x01" * 20 + b"e"
    for data in (b"d8:announce3:url4:info" + info + b"3:zzzi1ee", b"d4:info" + info + b"e",
                 b"d1:ad4:infoi1ee4:info" + info + b"e"):  # an "info" key deeper down is not the one
        value, span = bencoding.decode_with_span(data, b"info")
        assert value == decode(data) and span == dict_value_span(data, b"info")
        assert data[span[0]:span[1]] == info
    assert bencoding.decode_with_span(b"d1:ai1ee", b"info") == ({b"a": 1}, None)
    assert bencoding.decode_with_span(b"li1ee", b"info") == ([1], None)
