"""The header of files opwire writes in Thrift form, and the nesting bound every codec shares.

Layout (all integers big-endian)::

    offset  size  field
    0       8     magic  b"\\x89OPWIRE\\n"   (never the start of JSON, a zip, or a raw Thrift struct)
    8       1     header version (1)
    9       1     codec: b"B" binary, b"C" compact
    10      4     export schema version: major u16, minor u16
    14      4     opwire records version: major u16, minor u16
    18      1     length n of the root type name
    19      n     root type name, ASCII (an IDL struct name such as "ExportedProgram")
    19+n    ...   the Thrift value

`sniff(data)` tells what a file holds without decoding it; `read_header` checks it against this opwire.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from opwire.errors import DecodeError
from opwire.schema.models import RECORDS_VERSION, SCHEMA, SCHEMA_VERSION

__all__ = [
    "CODECS",
    "HEADER_VERSION",
    "MAGIC",
    "MAX_DEPTH",
    "OPW_MAGIC",
    "Header",
    "check_versions",
    "has_header",
    "read_header",
    "sniff",
    "write_header",
]

MAX_DEPTH = 192
"""Default bound on nesting (structs, unions, lists and maps on one path from the root; JSON objects and
arrays count the same). A subgraph adds 7 levels, so a program may nest about 26 subgraphs; torch programs
use a handful. Every codec takes `max_depth=` to change it."""

MAGIC = b"\x89OPWIRE\n"
OPW_MAGIC = b"\x89OPW\r\n\x1a\n"
"""The first bytes of a .opw archive (`opwire.serde.opw`, docs/wire-format.md): kept here beside the framed
Thrift magic so a file is sniffed without loading the archive reader."""
HEADER_VERSION = 1
CODECS = {"binary": b"B", "compact": b"C"}
_BY_BYTE = {v: k for k, v in CODECS.items()}
_FIXED = struct.Struct(">8sBcHHHHB")


class Header(NamedTuple):
    """What a header says: codec, root type, the root's schema version, both versions, payload offset."""

    codec: str
    root: str
    version: tuple[int, int]
    schema_version: tuple[int, int]
    records_version: tuple[int, int]
    offset: int


def _is_record(root: str) -> bool:
    """Whether `root` is one of opwire's own records (versioned by RECORDS_VERSION)."""
    sdef = SCHEMA.structs.get(root)
    return sdef is not None and sdef.module == "opwire"


def write_header(codec: str, root: str) -> bytes:
    """The header for a `root` value written with `codec` by this opwire."""
    name = root.encode("ascii")
    return _FIXED.pack(MAGIC, HEADER_VERSION, CODECS[codec], *SCHEMA_VERSION, *RECORDS_VERSION, len(name)) + name


def has_header(data: bytes | bytearray | memoryview) -> bool:
    """Whether `data` starts with opwire's magic (a raw Thrift value never does)."""
    return bytes(data[: len(MAGIC)]) == MAGIC


def _parse(data: bytes | bytearray | memoryview) -> Header | str:
    """The header, or a sentence saying why `data` has none."""
    if not has_header(data):
        return "it does not start with opwire's magic bytes"
    if len(data) < _FIXED.size:
        return f"the header is truncated ({len(data)} bytes, at least {_FIXED.size} needed)"
    _, hv, codec_b, smaj, smin, rmaj, rmin, n = _FIXED.unpack_from(bytes(data[: _FIXED.size]))
    if hv != HEADER_VERSION:
        return f"header version {hv} is not one this opwire reads ({HEADER_VERSION}); upgrade opwire"
    codec = _BY_BYTE.get(codec_b)
    if codec is None:
        return f"unknown codec byte {codec_b!r} (expected b'B' or b'C')"
    end = _FIXED.size + n
    raw_name = bytes(data[_FIXED.size : end])
    if len(raw_name) != n or not raw_name.isascii() or not raw_name.decode("ascii").isidentifier():
        return "the root type name in the header is truncated or not an identifier"
    root = raw_name.decode("ascii")
    schema_v, records_v = (smaj, smin), (rmaj, rmin)
    version = records_v if _is_record(root) else schema_v
    return Header(codec, root, version, schema_v, records_v, end)


def sniff(data: bytes | bytearray | memoryview) -> tuple[str, str, tuple[int, int]] | None:
    """(codec, root type name, version of the root's schema) if `data` starts with opwire's header, else None."""
    h = _parse(data)
    if isinstance(h, str):
        return None
    return h.codec, h.root, h.version


def read_header(data: bytes | bytearray | memoryview, source: str = "") -> Header:
    """The header of `data`; DecodeError if it is missing, malformed or from another major version."""
    h = _parse(data)
    where = f"{source}: " if source else ""
    if isinstance(h, str):
        raise DecodeError(f"{where}not an opwire Thrift file: {h}")
    check_versions(h, source)
    return h


def schema_version_error(version: tuple[int, int], source: str = "", program: bool = True) -> DecodeError | None:
    """The one export-schema version check: None when this opwire reads `version`, else the DecodeError naming
    both versions (`program`: the version a program states; else the one in a file's header)."""
    major, minor = version
    if major == SCHEMA_VERSION[0] or (program and (major, minor) == (0, 0)):  # 0.0: torch left it unset
        return None
    where = f"{source}: " if source else ""
    ours = f"this opwire reads major version {SCHEMA_VERSION[0]} (schema {SCHEMA_VERSION[0]}.{SCHEMA_VERSION[1]})"
    if program:
        return DecodeError(
            f"{where}the program was written with export schema {major}.{minor}; {ours}. Re-export it with a torch "
            f"whose schema major is {SCHEMA_VERSION[0]}, or use an opwire built for schema {major}.x",
            "schema_version",
        )
    return DecodeError(
        f"{where}the file was written with export schema {major}.{minor}; {ours}. "
        f"Convert it with an opwire built for schema {major}.x",
        "$",
    )


def check_versions(h: Header, source: str = "") -> None:
    """DecodeError naming both versions when the file's major version differs from this opwire's."""
    problem = schema_version_error(h.schema_version, source, program=False)
    if problem is not None:
        raise problem
    where = f"{source}: " if source else ""
    if _is_record(h.root) and h.records_version[0] != RECORDS_VERSION[0]:
        raise DecodeError(
            f"{where}the file was written with opwire records {h.records_version[0]}.{h.records_version[1]}; this "
            f"opwire reads major version {RECORDS_VERSION[0]} (records {RECORDS_VERSION[0]}.{RECORDS_VERSION[1]}). "
            f"Read it with an opwire whose records major version is {h.records_version[0]}",
            "$",
        )
