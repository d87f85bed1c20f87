"""The one opener: a path, bytes, a model or a torch program becomes a typed, opened object.

`open(source, expect=...)` judges a file by its first bytes and what it holds, within the decoding
budgets, and returns an `OpenedProgram` (programs and archives, opened lazily) or the file's own kind
(extern nodes, traces, snapshots, Values, findings).

Modules:
    containers: the containers recognised by a file's first bytes (a zip, Thrift with opwire's header, JSON)
    conversion: `convert`: a program or archive written again as JSON, Thrift binary/compact, .pt2 or .opw
    files: a whole input file read within a byte budget (`read_input`, `read_head`): devices, pipes never exhaust it
    inputs: a program's inputs read from a file by name (`read_inputs`), bound by name (`bind_inputs`), checked
    kinds: what `open` can return: the kinds of file opwire reads, by name, and the handles of two of them
    opened: `OpenedProgram`: a program or archive opened lazily, owner of everything derived from it
    opener: `open`: paths, bytes, models and torch programs to a typed, opened object
    outfiles: output files opened through `open_output`, never clobbering an input (`check_output`, `write_output`)
    signature: what a program takes and returns, read from its graph signature alone
    specs: the pytree specs of a program's top-level call, read by opwire's own parser
    summaries: `summary(opened)`: what `opwire inspect` says of anything `open` returns, one `InspectOutput`
"""

from __future__ import annotations

from opwire._lazy import submodule_getattr
from opwire.program.containers import CONTAINERS, Container, Opened
from opwire.program.conversion import CONVERT_TARGETS, ConvertTarget, convert, convert_target
from opwire.program.inputs import bind_inputs, check_extern_inputs, input_dtypes, read_inputs
from opwire.program.kinds import KINDS, FindingsFile, Kind, StreamedTrace
from opwire.program.opened import OpenedProgram, opened_of
from opwire.program.opener import Source, open
from opwire.program.outfiles import check_output, write_output
from opwire.program.signature import check_inputs, dtype_name, extern_inputs, op_name, program_signature
from opwire.program.summaries import summary

__all__ = [
    "CONTAINERS",
    "CONVERT_TARGETS",
    "KINDS",
    "Container",
    "ConvertTarget",
    "FindingsFile",
    "Kind",
    "Opened",
    "OpenedProgram",
    "Source",
    "StreamedTrace",
    "bind_inputs",
    "check_extern_inputs",
    "check_inputs",
    "check_output",
    "convert",
    "convert_target",
    "dtype_name",
    "extern_inputs",
    "input_dtypes",
    "op_name",
    "open",
    "opened_of",
    "program_signature",
    "read_inputs",
    "summary",
    "write_output",
]

__getattr__ = submodule_getattr(__name__, __path__)  # `opwire.program.signature` without importing it first
