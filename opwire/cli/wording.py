"""Errors in command-line words: the library's Python advice (`opwire.loads(...)`, `pt2.read`, `.to(torch.x)`)
replaced by the command or flag that does the same from a shell.

The library's messages are written for Python callers; `main` passes every error through `for_cli` before it
prints it, so no message advises a Python call on the command line. Each rule is a pattern of a library
message and its command-line wording; tests/cli/test_cli_wording.py checks that no Python advice is left.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["PYTHON_ADVICE", "for_cli"]

_COMMAND_FOR = {
    "ExportedProgram": "`opwire run`, `opwire convert`, `opwire view` or `opwire inspect`",
    "OpwireArchive": "`opwire run`, `opwire convert`, `opwire view` or `opwire inspect`",
    "CallTrace": "`opwire replay`, `opwire diff` or `opwire inspect`",
    "ExternKernelNodes": "`opwire exec` or `opwire inspect`",
    "Values": "`--inputs` of `opwire run`/`opwire exec`, or `opwire inspect`",
    "OpLibrarySnapshot": "`opwire ops bc-check` or `opwire inspect`",
}
_RAW_THRIFT = (
    "raw Thrift without opwire's header cannot be read from the command line (its codec and type are unknown); "
    "give a file opwire wrote (`opwire convert IN OUT --to compact` writes one)"
)
_WEIGHTS = (
    "give the .pt2 archive itself, or an archive with weights (`opwire convert PROG.pt2 PROG.bin --to compact` "
    "keeps them)"
)


def _read_as(match: re.Match[str]) -> str:
    root = match.group("root")
    return f"it holds a {root}: read it with {_COMMAND_FOR.get(root, '`opwire inspect`')}"


def _not_a_program(match: re.Match[str]) -> str:
    root = match.group("root")
    return f"expected a program or archive file, got a {root} file: {_read_as(match)}"


def _allow_flag(match: re.Match[str]) -> str:
    return "--allow-op " + ",".join(re.findall(r"'([^']*)'", match.group("ops")))


_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"allow_ops=\[(?P<ops>'[^\]]*')\]"), _allow_flag),  # the op policy's refusals: one flag for all
    (
        re.compile(r"\(import its Python package or torch\.ops\.load_library\('(?P<lib>[^']*)'\)\)"),
        r"(--import MODULE for its Python package, or --load-library \g<lib>)",
    ),
    (
        re.compile(
            r"Expected an OpwireArchive, ExportedProgram model, torch ExportedProgram or a path, got (?P<root>\w+)"
        ),
        _not_a_program,
    ),
    (re.compile(r"raw Thrift needs its codec and type: opwire\.loads\(data, cls, format=\.\.\.\)"), _RAW_THRIFT),
    (re.compile(r"pass the type: opwire\.loads\([^)]*\) \(models: opwire\.schema\.models\)"), _RAW_THRIFT),
    (re.compile(r"read it as (?P<root>\w+), or call opwire\.loads\(data\) without a type"), _read_as),
    (re.compile(r"read it as (?P<root>\w+)"), _read_as),
    (
        re.compile(r"read it with format='(?P<codec>\w+)'"),
        r"it is Thrift \g<codec>: opwire reads the codec from its header",
    ),
    (re.compile(r"pass an OpwireArchive with its weights \(opwire\.serde\.pt2\.read or [^)]*\)"), _WEIGHTS),
    (re.compile(r"pass an OpwireArchive \(opwire\.serde\.pt2\.read\) or state_dict=/constants="), _WEIGHTS),
    (re.compile(r"name it with to= \((?P<formats>[\w|]+)\)"), r"pass --to \g<formats>"),
    (
        re.compile(r"; the inputs give (?P<given>.*) \(`opwire\.program\.extern_inputs\(nodes\)` lists every name"),
        r"; --inputs gives \g<given> (`opwire inspect NODES` lists every name",
    ),
    (
        re.compile(r"convert it \(e\.g\. `\.to\(torch\.float32\)`\) before writing"),
        "this dtype has no export-schema number, so no opwire file can hold it",
    ),
    (
        re.compile(r"convert it \(x\.to\(torch\.(?P<dtype>\w+)\)\)"),
        r"give the input as \g<dtype> (a Values file keeps dtypes; plain JSON numbers are read as the signature asks)",
    ),
)

PYTHON_ADVICE = re.compile(
    r"opwire\.loads\(|read it as|pt2\.read|\.to\(torch\.|opwire\.dumps\(|opwire\.serde\.values"
    r"|torch\.ops\.load_library\(|allow_ops="
)
"""What must not appear in a command-line error (checked by the tests)."""


def for_cli(message: str) -> str:
    """`message` with its Python advice replaced by command-line advice."""
    for pattern, repl in _RULES:
        message = pattern.sub(repl, message)
    return message
