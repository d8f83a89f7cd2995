"""HPACK (RFC 7541) as common/wire/hpack_codec.py speaks it: the integer and literal representations and the
request examples of Appendix C encoded byte for byte, the response examples (with and without Huffman
coding, the table evicting at 256 octets) decoded to the fields the RFC lists, and answers from the `hpack`
library's encoder decoded as its own decoder reads them."""

from __future__ import annotations

import hpack
import pytest

from common.wire.hpack_codec import (
    H2ProtocolError,
    HeaderDecoder,
    HeaderEncoder,
    hpack_integer,
    hpack_literal,
)


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


@pytest.mark.parametrize(
    ("value", "prefix", "encoded"),
    [(10, 5, "0a"), (1337, 5, "1f9a0a"), (42, 8, "2a")],  # C.1.1, C.1.2, C.1.3
)
def test_integers_are_the_rfc_s_examples(value: int, prefix: int, encoded: str) -> None:
    assert hpack_integer(value, prefix, 0) == _hex(encoded)


def test_literal_fields_are_the_rfc_s_examples() -> None:
    # C.2.2 without indexing, its name from the static table; C.2.3 never indexed, a new name.
    assert hpack_literal(b":path", b"/sample/path", 0x00, 4) == _hex("040c 2f73 616d 706c 652f 7061 7468")
    assert hpack_literal(b"password", b"secret", 0x10, 4) == _hex(
        "1008 7061 7373 776f 7264 0673 6563 7265 74"
    )
    # C.2.1 with incremental indexing: the field enters the table (55 octets) and is one byte afterwards.
    encoder = HeaderEncoder()
    first = encoder.indexed(b"custom-key", b"custom-header")
    assert first == _hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")
    assert encoder.size == 55 and encoder.indexed(b"custom-key", b"custom-header") == b"\xbe"


def test_three_requests_on_one_connection_are_appendix_c3_byte_for_byte() -> None:
    """C.3: the `:authority` literal enters the table, later requests refer to it by its index as newer
    entries push it up (`:method GET`, `:scheme`, `:path` are static indexes, one byte each)."""
    encoder = HeaderEncoder()
    first = b"\x82\x86\x84" + encoder.indexed(b":authority", b"www.example.com")
    assert first == _hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")
    assert encoder.size == 57
    second = b"\x82\x86\x84" + encoder.indexed(b":authority", b"www.example.com")
    second += encoder.indexed(b"cache-control", b"no-cache")
    assert second == _hex("8286 84be 5808 6e6f 2d63 6163 6865")
    assert encoder.size == 110
    third = b"\x82\x87\x85" + encoder.indexed(b":authority", b"www.example.com")
    third += encoder.indexed(b"custom-key", b"custom-value")
    assert third == _hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")
    assert encoder.dynamic_entries == [(b"custom-key", b"custom-value"), (b"cache-control", b"no-cache"),
                                       (b":authority", b"www.example.com")]  # fmt: skip
    assert encoder.size == 164


def test_a_smaller_table_is_announced_and_evicts_the_oldest_entries() -> None:
    """6.3 and 4.4: after SETTINGS_HEADER_TABLE_SIZE shrinks, the next block opens with a size update and
    entries that no longer fit are gone (an evicted field is sent again as a literal)."""
    encoder = HeaderEncoder()
    encoder.indexed(b":authority", b"www.example.com")
    encoder.indexed(b"cache-control", b"no-cache")
    encoder.set_max_size(60)
    assert encoder.start() == hpack_integer(60, 5, 0x20) and encoder.start() == b""
    assert encoder.dynamic_entries == [(b"cache-control", b"no-cache")] and encoder.size == 53
    assert encoder.indexed(b":authority", b"www.example.com")[0] & 0xC0 == 0x40  # a literal again


# C.4 (requests, Huffman) and C.5 / C.6 (responses, table of 256 octets, without and with Huffman).
REQUESTS_HUFFMAN = [
    ("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
     [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")]),
    ("8286 84be 5886 a8eb 1064 9cbf",
     [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com"),
      ("cache-control", "no-cache")]),
    ("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
     [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"), (":authority", "www.example.com"),
      ("custom-key", "custom-value")]),
]  # fmt: skip
_R1 = [(":status", "302"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
       ("location", "https://www.example.com")]  # fmt: skip
_R2 = [(":status", "307"), *_R1[1:]]
_R3 = [(":status", "200"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
       ("location", "https://www.example.com"), ("content-encoding", "gzip"),
       ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")]  # fmt: skip
RESPONSES_PLAIN = [
    ("4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 "
     "3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", _R1, 222),
    ("4803 3330 37c1 c0bf", _R2, 222),
    ("88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 "
     "7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 "
     "6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31", _R3, 215),
]  # fmt: skip
RESPONSES_HUFFMAN = [
    ("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad "
     "1718 63c7 8f0b 97c8 e9ae 82ae 43d3", _R1, 222),
    ("4883 640e ffc1 c0bf", _R2, 222),
    ("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 "
     "e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
     _R3, 215),
]  # fmt: skip


def test_requests_with_huffman_coded_literals_decode_as_appendix_c4() -> None:
    decoder = HeaderDecoder()
    for block, fields in REQUESTS_HUFFMAN:
        assert decoder.decode(_hex(block)) == fields
    assert decoder.size == 164


@pytest.mark.parametrize("examples", [RESPONSES_PLAIN, RESPONSES_HUFFMAN], ids=["C.5", "C.6"])
def test_responses_decode_as_appendix_c5_and_c6_with_the_table_evicting(
    examples: list[tuple[str, list[tuple[str, str]], int]],
) -> None:
    decoder = HeaderDecoder()
    decoder.size_limit = 256  # the examples' SETTINGS_HEADER_TABLE_SIZE
    for block, fields, size in examples:
        assert decoder.decode(_hex(block)) == fields
        assert decoder.size == size
    assert decoder.entries[0] == _R3[-1] and len(decoder.entries) == 3


@pytest.mark.parametrize(
    ("block", "why"),
    [
        ("bf", "no table entry"),  # 2.3.3: an index past both tables is a COMPRESSION_ERROR
        ("3fe21f", "table size above the setting"),  # 6.3: a size update above SETTINGS_HEADER_TABLE_SIZE
        ("0184 ffff ffff", "EOS in a Huffman string"),  # 5.2: the EOS symbol (30 1s) inside a string
        ("0181 00", "bad Huffman padding"),  # 5.2: '0' then padding of 0s, where it must be 1s
        ("0003 6162", "a string past its end"),
        ("4003 616263", "a field without its value"),
    ],
)
def test_a_malformed_block_is_a_compression_error(block: str, why: str) -> None:
    with pytest.raises(H2ProtocolError, match=why) as raised:
        HeaderDecoder().decode(_hex(block))
    assert raised.value.code == 0x9


def test_answer_header_blocks_decode_as_hpack_reads_them_huffman_coded_or_not_with_the_table_evicting() -> (
    None
):
    encoder, reference, decoder = hpack.Encoder(), hpack.Decoder(), HeaderDecoder()
    for n in range(400):
        if n == 200:
            encoder.header_table_size = 256  # a size update in the next block: the table shrinks
        fields = [(":status", "200"), ("apns-id", f"{n:08d}-0000-4000-8000-{n:012d}"),
                  ("content-type", "application/json"), ("x-text", "é€ b" * (n % 40))]  # fmt: skip
        block = encoder.encode(fields, huffman=n % 2 == 0)
        assert decoder.decode(block) == reference.decode(block) == fields
    assert decoder.size <= 256
    with pytest.raises(Exception, match="no table entry"):
        decoder.decode(bytes([0x80 | 127, 10]))  # an index past the table
