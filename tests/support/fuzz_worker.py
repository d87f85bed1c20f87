"""Child process of the decoder fuzz tests (json, binary, compact): decodes inputs from stdin under a memory cap, reports each outcome.

Protocol (stdin): u32 length, then `codec root\\n` + payload. Reply (stdout): one JSON line per input,
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


def _one(codec: str, root: str, data: bytes) -> dict[str, object]:
    start = time.perf_counter()
    try:
        obj = opwire.loads(data, MODELS[root], codec)  # type: ignore[arg-type]
        again = opwire.loads(opwire.dumps(obj, codec), MODELS[root], codec)  # type: ignore[arg-type]
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
        codec, root = line.decode().split()
        out.write(json.dumps(_one(codec, root, data)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
