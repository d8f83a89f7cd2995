"""HPACK (RFC 7541) for the push providers' HTTP/2 client (common/wire/h2client.py): header blocks
encoded with a per-connection cache (a repeating value costs one byte after its first request, a
per-request value is never indexed) and answers' blocks decoded with a table-driven Huffman decoder."""

from __future__ import annotations

from collections import deque
from typing import Any

import hpack
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.table import HeaderTable

_COMPRESSION_ERROR = 0x9  # HTTP/2's error code for a header block that cannot be decoded


class H2ProtocolError(Exception):
    """The server broke HTTP/2: the connection is closed with GOAWAY and this error code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class PlainEncoder(hpack.Encoder):
    """hpack's encoder with literals sent as they are (the loopback peers' answers use it)."""

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        return super().encode(headers, huffman=False)


# --- HPACK (RFC 7541), the encoding side -----------------------------------------------------------------

_STATIC_NAMES: dict[bytes, int] = {}
for _index, (_name, _) in enumerate(HeaderTable.STATIC_TABLE, start=1):
    _STATIC_NAMES.setdefault(_name, _index)


def hpack_integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer with an N-bit prefix, `first` holding the representation's pattern bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name: bytes, value: bytes, pattern: int, prefix_bits: int) -> bytes:
    """A literal field (never Huffman-coded), its name from the static table when it is there."""
    index = _STATIC_NAMES.get(name, 0)
    head = hpack_integer(index, prefix_bits, pattern)
    if not index:
        head += hpack_integer(len(name), 7, 0) + name
    return head + hpack_integer(len(value), 7, 0) + value


class HeaderEncoder:
    """HPACK for this client's requests. Repeating fields go into the dynamic table once and are one
    index byte afterwards; per-request fields are never indexed. The table holds only what this encoder
    inserted, so an entry's index is known without searching: `_indexed` maps a field to its bytes."""

    def __init__(self, max_size: int = 4096) -> None:
        self.max_size = max_size
        self.entries: deque[tuple[bytes, bytes]] = deque()  # newest first (index 62 is entries[0])
        self.size = 0
        self._indexed: dict[tuple[bytes, bytes], bytes] = {}
        self._size_update: int | None = None

    def set_max_size(self, size: int) -> None:
        """The server's SETTINGS_HEADER_TABLE_SIZE: the table shrinks (announced in the next block)."""
        size = min(size, 4096)
        if size != self.max_size:
            self.max_size = size
            self._size_update = size
            self._evict()

    @property
    def dynamic_entries(self) -> list[tuple[bytes, bytes]]:
        return list(self.entries)

    def _evict(self) -> None:
        while self.size > self.max_size:
            name, value = self.entries.pop()
            self.size -= len(name) + len(value) + 32
        self._reindex()

    def _reindex(self) -> None:
        self._indexed = {entry: hpack_integer(62 + i, 7, 0x80) for i, entry in enumerate(self.entries)}

    def start(self) -> bytes:
        """What a header block begins with: a table size update when one is owed."""
        if self._size_update is None:
            return b""
        self._size_update = None
        return hpack_integer(self.max_size, 5, 0x20)

    def indexed(self, name: bytes, value: bytes) -> bytes:
        """A repeating field: its index when in the table, else a literal that enters it."""
        encoded = self._indexed.get((name, value))
        if encoded is not None:
            return encoded
        size = len(name) + len(value) + 32
        if size > self.max_size:
            return hpack_literal(name, value, 0x00, 4)
        self.entries.appendleft((name, value))
        self.size += size
        self._evict()  # also renumbers: every entry moved one index up
        return hpack_literal(name, value, 0x40, 6)


_STATIC_FIELDS: list[tuple[str, str]] = [(n.decode(), v.decode()) for n, v in HeaderTable.STATIC_TABLE]
_MAX_HEADER_LIST = 256 * 1024  # what one answer's header fields may add up to (decoded)


def _read_integer(data: bytes, offset: int, prefix_bits: int) -> tuple[int, int]:
    """An HPACK integer at `offset` with an N-bit prefix: (value, offset after it)."""
    limit = (1 << prefix_bits) - 1
    value = data[offset] & limit
    offset += 1
    if value < limit:
        return value, offset
    shift = 0
    while True:
        if offset >= len(data) or shift > 28:
            raise H2ProtocolError("header block: a bad integer", _COMPRESSION_ERROR)
        byte = data[offset]
        offset += 1
        value += (byte & 127) << shift
        shift += 7
        if not byte & 128:
            return value, offset


_huffman_table: list[tuple[int, bytes] | None] = []  # (state, byte) -> (next state, decoded bytes)
_huffman_ends: frozenset[int] = frozenset()  # states a string may end in (up to 7 bits of 1s as padding)


def huffman_table_build() -> None:
    """Build the Huffman decoder's table now (the push gateway, at start) rather than on first use."""
    if not _huffman_table:
        _huffman_build()


def _huffman_build() -> None:
    """A byte-at-a-time decoder for HPACK's Huffman code (RFC 7541, appendix B), built on first use: hpack's
    decoder walks it four bits at a time in Python, most of what an answer's header block cost."""
    global _huffman_table, _huffman_ends
    children: list[list[int]] = [[-1, -1]]  # the code's tree; a leaf has no children, its symbol below
    symbols: dict[int, int] = {}
    for symbol, (code, bits) in enumerate(zip(REQUEST_CODES, REQUEST_CODES_LENGTH, strict=True)):
        node = 0
        for i in range(bits - 1, -1, -1):
            bit = (code >> i) & 1
            if i == 0:
                symbols[len(children)] = symbol
                children[node][bit] = len(children)
                children.append([])
            else:
                if children[node][bit] == -1:
                    children[node][bit] = len(children)
                    children.append([-1, -1])
                node = children[node][bit]
    table: list[tuple[int, bytes] | None] = [None] * (len(children) * 256)
    for state, branches in enumerate(children):
        if not branches:
            continue
        for byte in range(256):
            node, out, valid = state, bytearray(), True
            for i in range(7, -1, -1):
                node = children[node][(byte >> i) & 1]
                leaf = symbols.get(node)
                if leaf is not None:
                    if leaf == 256:  # EOS inside a string is an error
                        valid = False
                        break
                    out.append(leaf)
                    node = 0
            table[state * 256 + byte] = (node, bytes(out)) if valid else None
    ends, node = {0}, 0
    for _ in range(7):
        node = children[node][1]
        ends.add(node)
    _huffman_table, _huffman_ends = table, frozenset(ends)


def _huffman_decode(data: bytes) -> bytes:
    if not _huffman_table:
        _huffman_build()
    table, state, out = _huffman_table, 0, bytearray()
    for byte in data:
        step = table[state * 256 + byte]
        if step is None:
            raise H2ProtocolError("header block: EOS in a Huffman string", _COMPRESSION_ERROR)
        state = step[0]
        out += step[1]
    if state not in _huffman_ends:
        raise H2ProtocolError("header block: bad Huffman padding", _COMPRESSION_ERROR)
    return bytes(out)


def _read_string(data: bytes, offset: int) -> tuple[str, int]:
    huffman = data[offset] & 0x80
    length, offset = _read_integer(data, offset, 7)
    end = offset + length
    if end > len(data):
        raise H2ProtocolError("header block: a string past its end", _COMPRESSION_ERROR)
    raw = data[offset:end]
    if huffman:
        raw = _huffman_decode(raw)
    return raw.decode("utf-8", "replace"), end


class HeaderDecoder:
    """HPACK for the answers (RFC 7541, 6): the server's dynamic table mirrored, Huffman-coded strings
    decoded a byte at a time. hpack's own decoder cost two to four times as much per answer (a debug log
    call and a tuple object per field, a Huffman walk four bits at a time)."""

    def __init__(self, max_size: int = 4096) -> None:
        self.max_size = max_size  # this client's SETTINGS_HEADER_TABLE_SIZE (the default, never changed)
        self.size_limit = max_size  # the size the server last chose, at most `max_size`
        self.entries: deque[tuple[str, str]] = deque()  # newest first: index 62 is entries[0]
        self.size = 0

    def _field(self, index: int) -> tuple[str, str]:
        if 0 < index <= 61:
            return _STATIC_FIELDS[index - 1]
        if 62 <= index < 62 + len(self.entries):
            return self.entries[index - 62]
        raise H2ProtocolError(f"header block: no table entry {index}", _COMPRESSION_ERROR)

    def _add(self, name: str, value: str) -> None:
        size = len(name.encode()) + len(value.encode()) + 32
        self.entries.appendleft((name, value))
        self.size += size
        self._evict()

    def _evict(self) -> None:
        while self.size > self.size_limit and self.entries:
            name, value = self.entries.pop()
            self.size -= len(name.encode()) + len(value.encode()) + 32

    def decode(self, data: bytes) -> list[tuple[str, str]]:
        try:
            return self._decode(data)
        except IndexError:
            raise H2ProtocolError("header block: cut short", _COMPRESSION_ERROR) from None

    def _decode(self, data: bytes) -> list[tuple[str, str]]:
        fields: list[tuple[str, str]] = []
        offset, end, total = 0, len(data), 0
        while offset < end:
            byte = data[offset]
            if byte & 0x80:  # indexed field
                index, offset = _read_integer(data, offset, 7)
                field = self._field(index)
            elif byte & 0xE0 == 0x20:  # dynamic table size update
                size, offset = _read_integer(data, offset, 5)
                if size > self.max_size:
                    raise H2ProtocolError("header block: table size above the setting", _COMPRESSION_ERROR)
                self.size_limit = size
                self._evict()
                continue
            else:  # a literal: with incremental indexing (01), without (0000) or never indexed (0001)
                indexing = byte & 0x40
                index, offset = _read_integer(data, offset, 6 if indexing else 4)
                if index:
                    name = self._field(index)[0]
                else:
                    name, offset = _read_string(data, offset)
                if offset >= end:
                    raise H2ProtocolError("header block: a field without its value", _COMPRESSION_ERROR)
                value, offset = _read_string(data, offset)
                field = (name, value)
                if indexing:
                    self._add(name, value)
            total += len(field[0]) + len(field[1]) + 32
            if total > _MAX_HEADER_LIST:
                raise H2ProtocolError("header block: too large", _COMPRESSION_ERROR)
            fields.append(field)
        return fields
