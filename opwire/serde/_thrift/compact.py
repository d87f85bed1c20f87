"""Thrift compact protocol, pure Python: a bounds-checked reader and a writer over bytes.

Varints are read in linear time with a hard byte limit (5 for 32-bit, 10 for 64-bit values); every
length is checked against the bytes that remain before anything is allocated.
"""

from __future__ import annotations

import struct

from opwire.serde._thrift.binary import WireError
from opwire.serde._thrift.spec import BOOL, BYTE, DOUBLE, I16, I32, I64, LIST, MAP, SET, STRING, STRUCT, UUID

__all__ = ["CompactReader", "CompactWriter"]

_D = struct.Struct("<d")
_B = struct.Struct("<b")
# compact type code -> TType, and back (bool fields carry their value in the type code: 1 true, 2 false)
_TO_TTYPE = {1: BOOL, 2: BOOL, 3: BYTE, 4: I16, 5: I32, 6: I64, 7: DOUBLE, 8: STRING, 9: LIST, 10: SET, 11: MAP}
_TO_TTYPE.update({12: STRUCT, 13: UUID})
_TO_CTYPE = {BOOL: 1, BYTE: 3, I16: 4, I32: 5, I64: 6, DOUBLE: 7, STRING: 8, LIST: 9, SET: 10, MAP: 11, STRUCT: 12}
_MIN_SIZE = {DOUBLE: 8, UUID: 16}


class CompactReader:
    """Reads Thrift compact values from `data`, refusing to read past its end."""

    name = "compact"

    def __init__(self, data: bytes, start: int = 0) -> None:
        self.data = data
        self.pos = start
        self.end = len(data)
        self._last: list[int] = []
        self._fid = 0
        self._bool: bool | None = None

    def _byte(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise WireError(
                f"truncated input: needed 1 more byte at offset {pos}, 0 remain; the data is cut short or corrupt"
            )
        self.pos = pos + 1
        return self.data[pos]

    def _varint(self, max_bytes: int) -> int:
        """An unsigned LEB128 varint of at most `max_bytes` bytes."""
        result = shift = 0
        for _ in range(max_bytes):
            b = self._byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                limit = 64 if max_bytes == 10 else 32
                if result >> limit:
                    raise WireError(f"varint at offset {self.pos - 1} overflows {limit} bits")
                return result
            shift += 7
        raise WireError(f"varint longer than {max_bytes} bytes at offset {self.pos - max_bytes}")

    def _zigzag(self, max_bytes: int) -> int:
        n = self._varint(max_bytes)
        return (n >> 1) ^ -(n & 1)

    def min_size(self, ttype: int) -> int:
        """Fewest bytes a value of wire type `ttype` occupies."""
        return _MIN_SIZE.get(ttype, 1)

    def _ttype(self, ctype: int) -> int:
        ttype = _TO_TTYPE.get(ctype)
        if ttype is None:
            raise WireError(f"invalid compact type code {ctype} at offset {self.pos - 1}")
        return ttype

    def struct_begin(self) -> None:
        """Start reading a struct: field ids restart from 0."""
        self._last.append(self._fid)
        self._fid = 0

    def struct_end(self) -> None:
        """Finish reading a struct."""
        self._fid = self._last.pop()

    def field_begin(self) -> tuple[int, int]:
        """(wire type, field id) of the next field; wire type 0 means the struct ends."""
        b = self._byte()
        if b == 0:
            return 0, 0
        ctype, delta = b & 0x0F, b >> 4
        ttype = self._ttype(ctype)
        fid = self._fid + delta if delta else self._zigzag(3)
        if not -(2**15) <= fid < 2**15:
            raise WireError(f"field id {fid} out of the i16 range")
        self._fid = fid
        if ttype == BOOL:
            self._bool = ctype == 1
        return ttype, fid

    def read_bool(self) -> bool:
        """A bool: from the field header, or a byte (1 true; 2 or 0 false) inside containers."""
        if self._bool is not None:
            v, self._bool = self._bool, None
            return v
        b = self._byte()
        if b not in (0, 1, 2):
            raise WireError(f"invalid bool byte {b} at offset {self.pos - 1} (expected 1 or 2)")
        return b == 1

    def read_i8(self) -> int:
        """A signed byte."""
        b = self._byte()
        return b - 256 if b > 127 else b

    def read_i16(self) -> int:
        """A zigzag varint i16."""
        v = self._zigzag(3)
        if not -(2**15) <= v < 2**15:
            raise WireError(f"i16 value {v} out of range")
        return v

    def read_i32(self) -> int:
        """A zigzag varint i32."""
        return self._zigzag(5)

    def read_i64(self) -> int:
        """A zigzag varint i64."""
        return self._zigzag(10)

    def read_double(self) -> float:
        """A little-endian IEEE double (NaN and infinities included)."""
        pos = self.pos
        if self.end - pos < 8:
            raise WireError(
                f"truncated input: needed 8 more bytes at offset {pos}, {self.end - pos} remain; "
                f"the data is cut short or corrupt"
            )
        self.pos = pos + 8
        return float(_D.unpack_from(self.data, pos)[0])

    def _length(self, n: int, unit: int, what: str) -> int:
        if n * unit > self.end - self.pos:
            raise WireError(
                f"{what} length {n} exceeds the {self.end - self.pos} bytes that remain at offset {self.pos}"
            )
        return n

    def read_bytes(self) -> bytes:
        """A varint-length-prefixed byte string."""
        n = self._length(self._varint(5), 1, "string")
        pos = self.pos
        self.pos = pos + n
        return self.data[pos : pos + n]

    def read_span(self) -> tuple[int, int]:
        """(offset, length) of a length-prefixed byte string, stepped over without copying it."""
        n = self._length(self._varint(5), 1, "string")
        pos = self.pos
        self.pos = pos + n
        return pos, n

    def list_begin(self) -> tuple[int, int]:
        """(element wire type, count) of a list or set."""
        b = self._byte()
        etype = self._ttype(b & 0x0F)
        n = b >> 4
        if n == 15:
            n = self._varint(5)
        return etype, self._length(n, self.min_size(etype), "list")

    def map_begin(self) -> tuple[int, int, int]:
        """(key wire type, value wire type, count) of a map; an empty map carries no types."""
        n = self._varint(5)
        if n == 0:
            return 0, 0, 0
        kv = self._byte()
        kt, vt = self._ttype(kv >> 4), self._ttype(kv & 0x0F)
        return kt, vt, self._length(n, self.min_size(kt) + self.min_size(vt), "map")

    def skip_fixed(self, n: int) -> None:
        """Skip `n` bytes (a uuid)."""
        if self.end - self.pos < n:
            raise WireError(f"truncated input: needed {n} more bytes at offset {self.pos}")
        self.pos += n


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class CompactWriter:
    """Writes Thrift compact values into a growing buffer (byte-identical to Apache Thrift's writer)."""

    def __init__(self) -> None:
        self.out = bytearray()
        self._last: list[int] = []
        self._fid = 0

    def struct_begin(self) -> None:
        """Start a struct: field ids restart from 0."""
        self._last.append(self._fid)
        self._fid = 0

    def struct_end(self) -> None:
        """End a struct with the stop byte."""
        self.out.append(0)
        self._fid = self._last.pop()

    def field(self, ttype: int, fid: int, value: object = None) -> bool:
        """Write a field header; a bool's value goes into the header (returns False: nothing more to write)."""
        ctype = (1 if value else 2) if ttype == BOOL else _TO_CTYPE[ttype]
        delta = fid - self._fid
        if 0 < delta <= 15:
            self.out.append(delta << 4 | ctype)
        else:
            self.out.append(ctype)
            self.i16(fid)
        self._fid = fid
        return ttype != BOOL

    def bool(self, v: bool) -> None:
        """A bool byte inside a container (1 true, 2 false)."""
        self.out.append(1 if v else 2)

    def i8(self, v: int) -> None:
        """A signed byte."""
        self.out += _B.pack(v)

    def _zigzag(self, v: int, bits: int) -> None:
        self.out += _varint_bytes(((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1))

    def i16(self, v: int) -> None:
        """A zigzag varint i16."""
        self._zigzag(v, 32)

    def i32(self, v: int) -> None:
        """A zigzag varint i32."""
        self._zigzag(v, 32)

    def i64(self, v: int) -> None:
        """A zigzag varint i64."""
        self._zigzag(v, 64)

    def double(self, v: float) -> None:
        """A little-endian double."""
        self.out += _D.pack(v)

    def bytes_(self, v: bytes) -> None:
        """A varint-length-prefixed byte string."""
        self.out += _varint_bytes(len(v))
        self.out += v

    def list_begin(self, etype: int, n: int) -> None:
        """A list or set header: size in the high nibble when it fits."""
        ctype = _TO_CTYPE[etype]
        if n <= 14:
            self.out.append(n << 4 | ctype)
        else:
            self.out.append(0xF0 | ctype)
            self.out += _varint_bytes(n)

    def map_begin(self, kt: int, vt: int, n: int) -> None:
        """A map header: a zero byte for an empty map."""
        if n == 0:
            self.out.append(0)
            return
        self.out += _varint_bytes(n)
        self.out.append(_TO_CTYPE[kt] << 4 | _TO_CTYPE[vt])
