"""Thrift binary protocol, pure Python: a bounds-checked reader and a writer over bytes.

Every length is checked against the bytes that remain before anything is allocated; every failure is a
WireError (the decoder adds the path).
"""

from __future__ import annotations

import struct

from opwire.serde._thrift.spec import BOOL, BYTE, DOUBLE, I16, I32, I64, LIST, MAP, SET, STRING, STRUCT, UUID

__all__ = ["BinaryReader", "BinaryWriter", "WireError"]

_B = struct.Struct(">b")
_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_D = struct.Struct(">d")
_FIELD = struct.Struct(">bh")
_LIST = struct.Struct(">bi")
_MAP = struct.Struct(">bbi")
_KNOWN = frozenset({BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST, UUID})
# Fewest bytes one value of each wire type takes: a length claiming more elements than could fit is refused.
_MIN_SIZE = {
    BOOL: 1,
    BYTE: 1,
    I16: 2,
    I32: 4,
    I64: 8,
    DOUBLE: 8,
    STRING: 4,
    STRUCT: 1,
    MAP: 6,
    SET: 5,
    LIST: 5,
    UUID: 16,
}


class WireError(Exception):
    """Bytes that break the wire format (truncated, bad length, bad type code); the decoder adds the path."""


class BinaryReader:
    """Reads Thrift binary values from `data`, refusing to read past its end."""

    name = "binary"

    def __init__(self, data: bytes, start: int = 0) -> None:
        self.data = data
        self.pos = start
        self.end = len(data)

    def _take(self, n: int) -> int:
        """Advance by `n` bytes and return the old position; WireError if fewer remain."""
        pos = self.pos
        if n > self.end - pos:
            raise WireError(
                f"truncated input: needed {n} more bytes at offset {pos}, {self.end - pos} remain; "
                f"the data is cut short or corrupt"
            )
        self.pos = pos + n
        return pos

    def min_size(self, ttype: int) -> int:
        """Fewest bytes a value of wire type `ttype` occupies."""
        return _MIN_SIZE.get(ttype, 1)

    def check_type(self, ttype: int) -> None:
        """WireError unless `ttype` is a Thrift type code."""
        if ttype not in _KNOWN:
            raise WireError(f"invalid wire type code {ttype}")

    def struct_begin(self) -> None:
        """Start reading a struct (nothing to do in binary)."""

    def struct_end(self) -> None:
        """Finish reading a struct (nothing to do in binary)."""

    def field_begin(self) -> tuple[int, int]:
        """(wire type, field id) of the next field; wire type 0 means the struct ends."""
        ttype = self.data[self._take(1)]
        if ttype == 0:
            return 0, 0
        self.check_type(ttype)
        self.pos -= 1
        _, fid = _FIELD.unpack_from(self.data, self._take(3))
        return ttype, fid

    def read_bool(self) -> bool:
        """A bool: byte 0 or 1."""
        b = self.data[self._take(1)]
        if b > 1:
            raise WireError(f"invalid bool byte {b} (expected 0 or 1)")
        return b == 1

    def read_i8(self) -> int:
        """A signed byte."""
        return int(_B.unpack_from(self.data, self._take(1))[0])

    def read_i16(self) -> int:
        """A big-endian i16."""
        return int(_H.unpack_from(self.data, self._take(2))[0])

    def read_i32(self) -> int:
        """A big-endian i32."""
        return int(_I.unpack_from(self.data, self._take(4))[0])

    def read_i64(self) -> int:
        """A big-endian i64."""
        return int(_Q.unpack_from(self.data, self._take(8))[0])

    def read_double(self) -> float:
        """A big-endian IEEE double (NaN and infinities included)."""
        return float(_D.unpack_from(self.data, self._take(8))[0])

    def _length(self, n: int, unit: int, what: str) -> int:
        if n < 0:
            raise WireError(f"negative {what} length {n}")
        if n * unit > self.end - self.pos:
            raise WireError(
                f"{what} length {n} exceeds the {self.end - self.pos} bytes that remain at offset {self.pos}"
            )
        return n

    def read_bytes(self) -> bytes:
        """A length-prefixed byte string (binary or UTF-8 string)."""
        n = self._length(self.read_i32(), 1, "string")
        pos = self._take(n)
        return self.data[pos : pos + n]

    def read_span(self) -> tuple[int, int]:
        """(offset, length) of a length-prefixed byte string, stepped over without copying it."""
        n = self._length(self.read_i32(), 1, "string")
        return self._take(n), n

    def list_begin(self) -> tuple[int, int]:
        """(element wire type, count) of a list or set."""
        etype, n = _LIST.unpack_from(self.data, self._take(5))
        self.check_type(etype)
        return etype, self._length(n, self.min_size(etype), "list")

    def map_begin(self) -> tuple[int, int, int]:
        """(key wire type, value wire type, count) of a map."""
        kt, vt, n = _MAP.unpack_from(self.data, self._take(6))
        if n:
            self.check_type(kt)
            self.check_type(vt)
        return kt, vt, self._length(n, self.min_size(kt) + self.min_size(vt), "map")

    def skip_fixed(self, n: int) -> None:
        """Skip `n` bytes (a uuid)."""
        self._take(n)


class BinaryWriter:
    """Writes Thrift binary values into a growing buffer."""

    def __init__(self) -> None:
        self.out = bytearray()

    def struct_begin(self) -> None:
        """Start a struct (nothing to write in binary)."""

    def struct_end(self) -> None:
        """End a struct with the stop byte."""
        self.out.append(0)

    def field(self, ttype: int, fid: int, value: object = None) -> bool:
        """Write a field header; returns True when the value still has to be written (always, in binary)."""
        self.out += _FIELD.pack(ttype, fid)
        return True

    def bool(self, v: bool) -> None:
        """A bool byte."""
        self.out.append(1 if v else 0)

    def i8(self, v: int) -> None:
        """A signed byte."""
        self.out += _B.pack(v)

    def i16(self, v: int) -> None:
        """A big-endian i16."""
        self.out += _H.pack(v)

    def i32(self, v: int) -> None:
        """A big-endian i32."""
        self.out += _I.pack(v)

    def i64(self, v: int) -> None:
        """A big-endian i64."""
        self.out += _Q.pack(v)

    def double(self, v: float) -> None:
        """A big-endian double."""
        self.out += _D.pack(v)

    def bytes_(self, v: bytes) -> None:
        """A length-prefixed byte string."""
        self.out += _I.pack(len(v))
        self.out += v

    def list_begin(self, etype: int, n: int) -> None:
        """A list or set header."""
        self.out += _LIST.pack(etype, n)

    def map_begin(self, kt: int, vt: int, n: int) -> None:
        """A map header."""
        self.out += _MAP.pack(kt, vt, n)
