"""Child process of the decoder fuzz tests (json, binary, compact): decodes inputs from stdin under a memory cap, reports each outcome.

Protocol (stdin): u32 length, then `codec root engine\\n` + payload (engine `-`: every engine, as `opwire.loads`
reads; `scan`: the archive scan of serde/_thrift/tables.py with the C module's walk and without, which must agree;
else one Thrift engine alone). Reply (stdout): one JSON line per input,
{"status": "ok" | "decode_error" | "foreign", "detail": str, "seconds": float}. "ok" means the result is a
valid model that round-trips; anything but ok/decode_error is a bug. A crash or a runaway allocation kills
this process, which the parent reports as a failure.
"""

from __future__ import annotations

import json
import resource
import struct
import sys
import time
import traceback

if __name__ == "__main__":
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

import opwire
from opwire.errors import DecodeError
from opwire.schema.models import MODELS
from opwire.serde import framing, thrift
from opwire.serde._thrift import tables


def _round_trip(codec: str, root: str, data: bytes, engine: str) -> tuple[object, object]:
    if engine == "-":
        obj = opwire.loads(data, MODELS[root], codec)  # type: ignore[arg-type]
        return obj, opwire.loads(opwire.dumps(obj, codec), MODELS[root], codec)  # type: ignore[arg-type]
    obj = thrift.decode(data, MODELS[root], codec, engine=engine)  # type: ignore[arg-type]
    return obj, thrift.decode(thrift.encode(obj, codec, engine=engine), MODELS[root], codec, engine=engine)  # type: ignore[arg-type]


def _scan(codec: str, data: bytes, native: bool) -> object:
    """The archive scan's tables, or its DecodeError's words and path."""
    try:
        return tables.scan(data, 0, codec, "fuzz", 10**9, framing.MAX_DEPTH, native=native)
    except DecodeError as exc:
        return str(exc), exc.path


def _one(codec: str, root: str, data: bytes, engine: str) -> dict[str, object]:
    start = time.perf_counter()
    if engine == "scan":
        ours, theirs = _scan(codec, data, True), _scan(codec, data, False)
        status = "foreign" if ours != theirs else "decode_error" if isinstance(ours, tuple) else "ok"
        detail = f"C {ours!r:.300} != Python {theirs!r:.300}" if ours != theirs else ""
        return {"status": status, "detail": detail, "seconds": time.perf_counter() - start}
    try:
        obj, again = _round_trip(codec, root, data, engine)
        status, detail = ("ok", "") if type(again) is type(obj) else ("foreign", "round trip changed type")
    except DecodeError as exc:
        status, detail = "decode_error", str(exc)[:200]
    except BaseException as exc:  # the bug this test looks for
        status, detail = "foreign", "".join(traceback.format_exception(exc))[-2000:]
    return {"status": status, "detail": detail, "seconds": time.perf_counter() - start}


def main() -> None:
    """Serve inputs until stdin closes."""
    inp, out = sys.stdin.buffer, sys.stdout
    out.write("ready\n")
    out.flush()
    while True:
        head = inp.read(4)
        if len(head) < 4:
            return
        (n,) = struct.unpack(">I", head)
        msg = inp.read(n)
        line, _, data = msg.partition(b"\n")
        codec, root, engine = line.decode().split()
        out.write(json.dumps(_one(codec, root, data, engine)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
