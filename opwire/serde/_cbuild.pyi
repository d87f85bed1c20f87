"""Types of the C model builder (sources in `_cbuild_src/`; the plan layout in `_cplan.py`)."""

from typing import Any

class Fallback(Exception):
    """The input is not taken: the checking path decides."""

class TooMany(Exception):
    """A Thrift decode read more values than its budget."""

def compile(types: tuple[Any, ...], structs: tuple[Any, ...], objects: tuple[Any, ...], /) -> Any:
    """The plan (a capsule) from the tables `_cplan` writes."""

def json_build(plan: Any, struct_index: int, parsed: Any, /) -> Any:
    """The model of struct `struct_index` from JSON bytes or parsed JSON; Fallback when not taken."""

def thrift_build(
    plan: Any, struct_index: int, data: bytes, start: int, compact: bool, limit: int, /
) -> tuple[Any, int]:
    """(the model in canonical Thrift `data[start:]`, values read); Fallback, or TooMany past `limit`."""

def thrift_check(plan: Any, struct_index: int, data: bytes, compact: bool, /) -> bool:
    """True where canonical Thrift `data` holds one value of struct `struct_index` within the IDL's rules (unions
    single, required fields present, enums known); Fallback otherwise."""

def json_write(plan: Any, struct_index: int, model: Any, /) -> bytes:
    """The model's JSON bytes (torch's export JSON); Fallback when a value is not taken."""

def thrift_skip(
    data: Any, pos: int, compact: bool, wire: int, depth: int, max_depth: int, budget: int, /
) -> tuple[int, int] | None:
    """(end, values charged) of the struct, list, set or map at `data[pos:]` as the checking decoder's `skip` steps
    over it; None where that walk must decide."""

def thrift_tensor(
    data: Any, pos: int, compact: bool, max_depth: int, budget: int, /
) -> tuple[int, int, int, int, int, int, int] | None:
    """(end, values charged, data prefix, data start, data length, padding prefix, padding length) of the
    TensorValue at `data[pos:]` as the archive scan reads it (-1 prefixes: absent); None where that scan decides."""
