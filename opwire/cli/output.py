"""How every `--json` prints: an IDL record (opwire.thrift) through opwire's JSON codec, indented for people.

One writer for every command, so the IDL alone decides the shape: `opwire.loads(out, m.<Record>)` reads it back.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

from opwire.serde import dumps

__all__ = ["print_record"]


def print_record(record: BaseModel) -> None:
    """Print `record` as JSON on stdout (every field written, None as null, non-finite floats as strings)."""
    sys.stdout.write(dumps(record, indent=2).decode("ascii") + "\n")
    sys.stdout.flush()
