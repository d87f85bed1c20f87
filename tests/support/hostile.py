"""The shared table of hostile inputs (issue 10): each attack file rebuilt from its description, one entry each.

A `Case` says how to build the file (`build(work) -> Path`, writing only inside `work.dir`), which
subcommands to run over it (argv templates; `{file}` is the hostile file, `{inputs}` a good Values file
for the base program, `{program}` the good base program, `{out}` a path that must not be written),
the exit code and the pattern the one stderr line must match. tests/cli/test_hostile.py runs every
command of every case as a user would (a subprocess under RLIMIT_AS, with a time limit) and checks: that
exit code, one line on stderr matching the pattern, no traceback, nothing on stdout, and no file
created or changed in the case's directory (the side effect an attack aims for).

Adding a case is one `Case(...)` in `CASES` (the execution-side cases append theirs the same way).
"""

from __future__ import annotations

import functools
import json
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CASES", "Case", "Work", "base_program_json", "patch_zip_entry"]

# argv templates by what the hostile file is
PROGRAM_COMMANDS = (
    "inspect {file}",
    "convert {file} {out}.json",
    "convert {file} {out}.pt2",
    "run {file} --inputs {inputs}",
)
ARCHIVE_COMMANDS = ("inspect {file}", "convert {file} {out}.json", "run {file} --inputs {inputs}")
NODES_COMMANDS = ("inspect {file}", "exec {file} --inputs {inputs}")
VALUES_COMMANDS = ("run {program} --inputs {file}", "exec {nodes} --inputs {file}")
DEVICE_COMMANDS = ("run {program} --inputs {inputs} --device {file}", "replay {trace} --device {file}")


@dataclass
class Work:
    """Where a case builds its file, and the good files its commands may need beside it."""

    dir: Path

    def path(self, name: str) -> Path:
        return self.dir / name

    def program(self) -> Path:
        p = self.dir / "program.json"
        p.write_bytes(base_program_json())
        return p

    def inputs(self) -> Path:
        p = self.dir / "inputs.json"
        p.write_bytes(_base_inputs_json())
        return p

    def nodes(self) -> Path:
        p = self.dir / "nodes.json"
        p.write_text(json.dumps({"nodes": []}))
        return p

    def trace(self) -> Path:
        p = self.dir / "trace.json"
        p.write_bytes(_base_trace())
        return p


@dataclass(frozen=True)
class Case:
    """One hostile input and what every subcommand must answer to it."""

    name: str
    attack: int  # the attack class of issue 10 (1-9)
    build: Callable[[Work], Path | str]  # the file (or, for device cases, the device string)
    commands: tuple[str, ...]
    message: str  # regex the one stderr line must match (after "opwire CMD: error: ")
    exit_code: int = 2
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ base files
@functools.cache
def _base_export() -> Any:
    import torch

    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    batch = torch.export.Dim("batch", min=2, max=64)
    return torch.export.export(AddOne(), (torch.randn(3, 4),), dynamic_shapes=({0: batch},))


@functools.cache
def base_program_json() -> bytes:
    """torch's JSON of a one-node program with a dynamic batch size (so its sizes carry `expr_str`)."""
    import opwire

    return opwire.dumps(opwire.serde.from_exported_program(_base_export()))


@functools.cache
def _base_inputs_json() -> bytes:
    import torch

    import opwire
    from opwire.schema import models as m
    from opwire.serde import objects

    return opwire.dumps(m.Values(values={"x": objects.from_python(torch.ones(3, 4), "x")}))


@functools.cache
def _base_trace() -> bytes:
    import torch

    import opwire

    with opwire.record() as trace:
        torch.ones(2) + 1
    return opwire.dumps(trace.model)


@functools.cache
def _base_pt2() -> bytes:
    import tempfile

    from opwire.serde import pt2
    from opwire.serde.torch_bridge import archive_from_exported_program

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "base.pt2"
        pt2.write(archive_from_exported_program(_base_export()), path)
        return path.read_bytes()


def _program_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    doc = json.loads(base_program_json())
    edit(doc)
    return json.dumps(doc).encode()


def _write(work: Work, name: str, data: bytes) -> Path:
    p = work.path(name)
    p.write_bytes(data)
    return p


def _once(build: Callable[[Work], Path]) -> Callable[[Work], Path]:
    """`build` of a file whose bytes do not depend on its directory (and which leaves nothing else there): built
    the first time, then the same bytes written under the same name into each later directory, so that every
    command of a case still gets a file of its own without exporting, zipping or compressing it again."""
    made: list[tuple[str, bytes]] = []

    def again(work: Work) -> Path:
        if made:
            return _write(work, *made[0])
        path = build(work)
        made.append((path.name, path.read_bytes()))
        return path

    return again


# -------------------------------------------------------------------------------- attack 2: expr_str
def _set_first_expr(expr: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        for meta in doc["graph_module"]["graph"]["tensor_values"].values():
            for size in meta["sizes"]:
                if "as_expr" in size:
                    size["as_expr"]["expr_str"] = expr
                    return
        raise AssertionError("the base program has no symbolic size")

    return edit


def _expr_program(expr: str) -> Callable[[Work], Path]:
    def build(work: Work) -> Path:
        text = expr.replace("{dir}", str(work.dir))
        return _write(work, "evil.json", _program_with(_set_first_expr(text)))

    return build


# ---------------------------------------------------------------------------- attack 3: pytree specs
def _spec_program(out_spec: str) -> Callable[[Work], Path]:
    def build(work: Work) -> Path:
        def edit(doc: dict[str, Any]) -> None:
            doc["graph_module"]["module_call_graph"][0]["signature"]["out_spec"] = out_spec

        return _write(work, "evil.json", _program_with(edit))

    return build


def _dict_spec(keys: list[Any]) -> str:
    leaf = {"type": None, "context": None, "children_spec": []}
    node = {"type": "builtins.dict", "context": json.dumps(keys), "children_spec": [leaf] * len(keys)}
    return json.dumps([1, node])


_DEFAULTDICT_ABORT = json.dumps(
    [
        1,
        {
            "type": "collections.defaultdict",
            "context": {"default_factory_module": "os", "default_factory_name": "abort", "dict_context": ["a"]},
            "children_spec": [{"type": None, "context": None, "children_spec": []}],
        },
    ]
)


# ------------------------------------------------------------------------------------ attack 5: zips
def patch_zip_entry(
    path: Path, name: str, *, method: int | None = None, flags: int | None = None, file_size: int | None = None
) -> None:
    """Rewrite fields of entry `name` in both its local header and its central-directory record."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
        cd_start = z.start_dir  # type: ignore[attr-defined]
    local = info.header_offset
    cd = data.index(b"PK\x01\x02" + data[cd_start + 4 : cd_start + 4], cd_start)
    while True:  # find this entry's central record by its local header offset
        (offset,) = struct.unpack_from("<I", data, cd + 42)
        if offset == local:
            break
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, cd + 28)
        cd += 46 + name_len + extra_len + comment_len
    if method is not None:
        struct.pack_into("<H", data, local + 8, method)
        struct.pack_into("<H", data, cd + 10, method)
    if flags is not None:
        struct.pack_into("<H", data, local + 6, flags)
        struct.pack_into("<H", data, cd + 8, flags)
    if file_size is not None:
        struct.pack_into("<I", data, local + 22, file_size)
        struct.pack_into("<I", data, cd + 24, file_size)
    path.write_bytes(bytes(data))


def _pt2_with_program(
    compress: int = zipfile.ZIP_STORED, payload: bytes | None = None, **patch: int
) -> Callable[[Work], Path]:
    """The base .pt2 with its program entry rewritten (`payload` instead of the JSON, if given) and patched."""

    @_once
    def build(work: Work) -> Path:
        src = work.path("base.pt2")
        src.write_bytes(_base_pt2())
        dst = work.path("evil.pt2")
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info)
                if info.filename.endswith("models/model.json"):
                    target = info.filename
                    zout.writestr(info.filename, payload if payload is not None else data, compress_type=compress)
                else:
                    zout.writestr(info, data)
        src.unlink()
        if patch:
            patch_zip_entry(dst, target, **patch)
        return dst

    return build


@functools.cache
def _gib_of_zeros_deflated() -> tuple[bytes, int]:
    """(raw deflate of 1 GiB of zeros, its CRC-32), once per process.

    A full flush ends each 16 MiB piece on a byte boundary with an empty dictionary, so every piece deflates
    to the same bytes: one piece is compressed and repeated (milliseconds instead of seconds), at a ratio
    of about 1,028 (plain deflate reaches 1,029). The CRC-32 of 1 GiB is the piece's, combined with itself six
    times (`_crc32_combine`: milliseconds, where running zlib.crc32 over the gibibyte took ~0.4 CPU-s).
    """
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"\0" * (16 << 20)
    piece = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    raw = piece * 64 + comp.flush()
    crc, size = zlib.crc32(chunk), len(chunk)
    for _ in range(6):
        crc, size = _crc32_combine(crc, crc, size), 2 * size
    return raw, crc


def _crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of `a + b` from `crc1` = crc32(a), `crc2` = crc32(b) and len(b), as zlib's `crc32_combine`
    computes it: crc1 times x^(8 * len2) modulo the CRC polynomial, plus crc2."""
    shift, square = 1 << 31, 1 << 30  # 1 and x, reflected as zlib holds them
    for _ in range(3):
        square = _multmodp(square, square)  # x^8: one byte
    while len2:
        if len2 & 1:
            shift = _multmodp(square, shift)
        len2 >>= 1
        square = _multmodp(square, square)
    return _multmodp(shift, crc1) ^ crc2


def _multmodp(a: int, b: int) -> int:
    """a times b modulo the CRC-32 polynomial (zlib's `multmodp`, reflected bit order)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ 0xEDB88320 if b & 1 else b >> 1


@_once
def _deflate_bomb(work: Work) -> Path:
    """An entry declaring 1 GiB from about a megabyte of deflate (a ratio past the budget)."""
    raw, crc = _gib_of_zeros_deflated()
    dst = work.path("bomb.pt2")
    _raw_zip(dst, "archive/models/model.json", raw, 8, 1 << 30, crc)
    return dst


@_once
def _lying_size(work: Work) -> Path:
    """A deflate entry declaring 1000 bytes that inflates to 10 MB (within the ratio, past its declared size)."""
    data = b"{" + b" " * (10 << 20) + b"}"
    raw = zlib.compress(data, 9)[2:-4]
    dst = work.path("liar.pt2")
    _raw_zip(dst, "archive/models/model.json", raw, 8, 1000, zlib.crc32(data))
    return dst


def _raw_zip(dst: Path, name: str, raw: bytes, method: int, file_size: int, crc: int) -> None:
    """A one-entry zip (plus archive_format) written byte by byte, sizes and CRC as given."""
    entries = [("archive/archive_format", b"pt2", 0, 3, zlib.crc32(b"pt2")), (name, raw, method, file_size, crc)]
    out, central = bytearray(), bytearray()
    for ename, body, meth, size, ecrc in entries:
        n = ename.encode()
        offset = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, meth, 0, 0, ecrc, len(body), size, len(n), 0)
        out += n + body
        central += struct.pack(
            "<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, meth, 0, 0, ecrc, len(body), size, len(n), 0, 0, 0, 0, 0,
            offset,
        )  # fmt: skip
        central += n
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(out), 0)
    dst.write_bytes(bytes(out + central + end))


@_once
def _corrupt_deflate(work: Work) -> Path:
    data = base_program_json()
    raw = bytearray(zlib.compress(data, 9)[2:-4])
    raw[0] = 0x07  # the first block: final, of type 3 (reserved): invalid deflate
    dst = work.path("corrupt.pt2")
    _raw_zip(dst, "archive/models/model.json", bytes(raw), 8, len(data), zlib.crc32(data))
    return dst


def _aoti_package(method: int) -> Callable[[Work], Path]:
    def build(work: Work) -> Path:
        dst = work.path("package.pt2")
        with zipfile.ZipFile(dst, "w") as z:
            z.writestr("package/data/aotinductor/model/abc.wrapper.json", json.dumps({"nodes": []}))
        patch_zip_entry(dst, "package/data/aotinductor/model/abc.wrapper.json", method=method)
        return dst

    return build


# -------------------------------------------------------------------------------- attack 6: weights
def _archive_with_weight(**tensor: Any) -> Callable[[Work], Path]:
    """An OpwireArchive JSON whose program binds weight `w` described by `tensor` (TensorValue fields)."""

    def build(work: Work) -> Path:
        import base64

        doc = json.loads(base_program_json())
        value = {
            "dtype": 7,
            "sizes": [2, 2],
            "strides": [2, 1],
            "storage_offset": 0,
            "device": {"type": "cpu", "index": None},
            "requires_grad": False,
            "data": base64.b64encode(b"\0" * 16).decode(),
            "digest": None,
            "layout": None,
        }
        value.update(tensor)
        archive = {"program": doc, "weights": {"w": value}, "constants": {}, "opwire_version": "0"}
        return _write(work, "weights.json", json.dumps(archive).encode())

    return build


def _pt2_raw_weight(
    sizes: list[int], strides: list[int], storage: bytes, device: str = "cpu"
) -> Callable[[Work], Path]:
    """A .pt2 whose one weight is stored raw (`storage`) with the given meta."""

    @_once
    def build(work: Work) -> Path:
        src = _write(work, "good.pt2", _one_weight_pt2())
        dst = work.path("weights.pt2")
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info)
                if info.filename.endswith("_weights_config.json"):
                    cfg = json.loads(data)
                    for meta in cfg["config"].values():
                        tm = meta["tensor_meta"]
                        tm["sizes"] = [{"as_int": n} for n in sizes]
                        tm["strides"] = [{"as_int": n} for n in strides]
                        tm["device"] = {"type": device, "index": None}
                    data = json.dumps(cfg).encode()
                elif "/data/weights/" in info.filename and not info.filename.endswith(".json"):
                    data = storage
                zout.writestr(info.filename, data)
        src.unlink()
        return dst

    return build


@functools.cache
def _one_weight_pt2() -> bytes:
    """A good .pt2 of `x * w` (one 3x4 weight), once per process."""
    import tempfile

    import torch

    from opwire.serde import pt2
    from opwire.serde.torch_bridge import archive_from_exported_program

    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.w

    ep = torch.export.export(Scale(), (torch.ones(3, 4),))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "good.pt2"
        pt2.write(archive_from_exported_program(ep), path)
        return path.read_bytes()


@functools.cache
def _scale_export() -> Any:
    """`x * w + v` (two 3x4 weights) exported, once per process (read, never changed, by the builders)."""
    import torch

    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3, 4))
            self.v = torch.nn.Parameter(torch.full((3, 4), 2.0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.w + self.v

    return torch.export.export(Scale(), (torch.ones(3, 4),))


def _opw_with(edit: Callable[[dict[str, Any]], None], cut: int = 0) -> Callable[[Work], Path]:
    """A good two-weight .opw whose table `edit` changes (header length and CRC fixed up), `cut` bytes cut off."""

    @_once
    def build(work: Work) -> Path:
        from opwire.serde._archive.opw_table import HEADER, Header, pack_header

        data = _scale_opw()
        _, _, _, _, t_len, d_off, d_len, _, _, _ = HEADER.unpack_from(data)
        table = json.loads(data[64 : 64 + t_len])
        edit(table)
        raw = json.dumps(table).encode()
        new_off = (64 + len(raw) + 63) // 64 * 64
        out = pack_header(Header(64, len(raw), new_off, d_len, zlib.crc32(raw))) + raw
        out += b"\0" * (new_off - len(out)) + data[d_off:]
        return _write(work, "evil.opw", out[: len(out) - cut])

    return build


@functools.cache
def _scale_opw() -> bytes:
    """The good two-weight .opw of `_scale_export`, once per process."""
    import tempfile

    from opwire.serde import opw
    from opwire.serde.torch_bridge import archive_from_exported_program

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "good.opw"
        opw.write(archive_from_exported_program(_scale_export()), path)
        return path.read_bytes()


def _opw_tensor(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def edit(table: dict[str, Any]) -> None:
        table["weights"]["w"].update(fields)

    return edit


@_once
def _pt2_shared_deflated_entry(work: Work) -> Path:
    """A .pt2 whose 12 weights name one deflated entry, the first claiming more bytes than the entry holds."""
    import torch

    src = work.path("good.pt2")
    torch.export.save(_scale_export(), src)
    dst = work.path("shared.pt2")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("_weights_config.json"):
                cfg = json.loads(data)
                meta = cfg["config"]["w"]
                for i in range(12):
                    cfg["config"][f"extra{i}"] = meta
                cfg["config"]["v"] = json.loads(json.dumps(meta))
                cfg["config"]["v"]["tensor_meta"]["sizes"] = [{"as_int": 3}, {"as_int": 1 << 20}]
                cfg["config"]["v"]["tensor_meta"]["strides"] = [{"as_int": 1 << 20}, {"as_int": 1}]
                data = json.dumps(cfg).encode()
            method = zipfile.ZIP_DEFLATED if "/data/weights/weight_" in info.filename else zipfile.ZIP_STORED
            zout.writestr(info.filename, data, compress_type=method)
    src.unlink()
    return dst


OPW_OPEN_COMMANDS = ("inspect {file}", "convert {file} {out}.json", "run {file} --inputs {inputs}")
OPW_TENSOR_COMMANDS = ("convert {file} {out}.pt2", "run {file} --inputs {inputs}")


# ---------------------------------------------------------------------- item 6: amplification budget
def _as_none_node(work: Work) -> Path:
    """A compact Node with 1M `as_none` outputs: 2 MB of bytes that decode into a million models."""
    from opwire.serde import framing

    n = 1_000_000
    body = bytearray()
    body += b"\xa8\x06aten.x"  # field 10 (target): string "aten.x"
    body += b"\xa9\x0c"  # field 20 (inputs): list of 0 structs
    body += b"\xa9\xfc" + _varint(n)  # field 30 (outputs): list of n structs
    body += b"\xa1\x00" * n  # each: Argument{as_none (10): true} then stop
    body += b"\xab\x00"  # field 40 (metadata): empty map
    body += b"\x00"
    return _write(work, "node.bin", framing.write_header("compact", "Node") + bytes(body))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _short_strings(work: Work) -> Path:
    """Issue 16: 60 MB of compact `Argument.as_strings` holding 20M two-character strings (1.5 GB decoded)."""
    from opwire.serde import framing

    n = 20_000_000
    path = work.path("strings.bin")
    with path.open("wb") as f:  # written in parts: the 60 MB are made once, not copied into one bytes again
        f.write(framing.write_header("compact", "Argument"))
        f.write(b"\x09\xca\x01" + b"\xf8" + _varint(n))  # field 101: list of n strings
        f.write(b"\x02ab" * n)
        f.write(b"\x00")
    return path


def _escaped_quotes(work: Work) -> Path:
    """Issue 16: an unterminated JSON string of `\\"[` runs (2.4 MB): the old pre-scan regex was quadratic."""
    return _write(work, "quotes.json", b'{"graph_module": ["' + b'\\"[' * 800_000)


def tensor_frames_trace(work: Work, n: int = 300_000) -> Path:
    """Issue 16: a streamed trace of `n` tensor frames (47 bytes each: 14 MB for 300k) that cost +1 GB at
    open when each frame had a fresh budget. Built from one encoded frame with the name's digits replaced."""
    return _write(work, "frames.trace", _tensor_frames(n))


@functools.cache
def _tensor_frames(n: int) -> bytes:
    """`tensor_frames_trace`'s bytes, once per process and `n`."""
    from opwire.recording.stream_frames import ROOT
    from opwire.schema import models as m
    from opwire.serde import framing, thrift

    def frame(kind: bytes, value: Any) -> bytes:
        body = thrift.encode(m.TraceFrame(**value), "compact", framed=False)
        return struct.pack(">cQI", kind, len(body), zlib.crc32(body)) + body

    version = m.SchemaVersion(major=8, minor=0)
    header = m.TraceHeader(
        opwire_version="0", torch_version="0", op_schemas={}, outputs_mode="full", schema_version=version
    )
    value = m.TensorValue(
        dtype=m.ScalarType.FLOAT, sizes=[0], strides=[1], storage_offset=0, device=m.Device(type="cpu"),
        requires_grad=False, data=b"",
    )  # fmt: skip
    body = thrift.encode(m.TraceFrame(tensor=m.TraceTensor(name="t000000", value=value)), "compact", framed=False)
    head, tail = body.split(b"t000000")
    parts = [framing.write_header("compact", ROOT), frame(b"H", {"header": header})]
    for i in range(n):
        b = head + b"t%06d" % i + tail
        parts.append(struct.pack(">cQI", b"T", len(b), zlib.crc32(b)) + b)
    parts.append(frame(b"E", {"trailer": m.TraceEnd(records=0, tensors=n, payloads=0, payload_bytes=0)}))
    return b"".join(parts)


def _deep_json(work: Work) -> Path:
    return _write(work, "deep.json", b"[" * 100_000 + b"]" * 100_000)


def _mutated_metadata(work: Work) -> Path:
    """A recorded call whose `mutated` metadata nests past the stdlib JSON parser's stack."""
    doc = json.loads(_base_trace())
    doc["records"][-1]["metadata"]["mutated"] = "[" * 5000
    return _write(work, "mutated.json", json.dumps(doc).encode())


def _deep_object(work: Work) -> Path:
    return _write(work, "deep_obj.json", b'{"nodes": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")


# ------------------------------------------------------------------------------------------ the table
CASES: list[Case] = [
    # attack 2: nothing from a file reaches an evaluator (expr_str)
    Case(
        "expr_shell",
        2,
        _expr_program("__import__('os').system('touch {dir}/pwned')"),
        PROGRAM_COMMANDS,
        r"not a function torch's export writes.*graph_module\.graph\.tensor_values",
    ),
    Case("expr_attribute", 2, _expr_program("s0.__class__"), PROGRAM_COMMANDS, r"unexpected character '\.'"),
    Case("expr_huge_power", 2, _expr_program("2**2**2**2**2**2"), PROGRAM_COMMANDS, r"an exponent of|a power of"),
    Case("expr_lambda", 2, _expr_program("(lambda: 0)()"), PROGRAM_COMMANDS, r"unexpected character ':' at position 7"),
    # attack 3: pytree specs never import
    Case(
        "spec_enum_import",
        3,
        _spec_program(_dict_spec([{"__enum__": True, "fqn": "this:s", "name": "x"}])),
        ("run {file} --inputs {inputs}", "convert {file} {out}.pt2", "convert {file} {out}.json"),
        r"not a member of an enum class of an imported module.*--import this",
    ),
    Case(
        "spec_defaultdict_abort",
        3,
        _spec_program(_DEFAULTDICT_ABORT),
        ("run {file} --inputs {inputs}", "convert {file} {out}.pt2"),
        r"defaultdict factory os\.abort is not one opwire builds",
    ),
    Case(
        "spec_unregistered_class",
        3,
        _spec_program(json.dumps([1, {"type": "evil.Thing", "context": "null", "children_spec": []}])),
        ("run {file} --inputs {inputs}",),
        r"pytree class 'evil\.Thing', which no imported module has registered.*--import evil",
    ),
    # attack 5: one zip reader, bounded
    Case(
        "zip_bzip2",
        5,
        _pt2_with_program(zipfile.ZIP_BZIP2, b"{" + b" " * (10 << 20) + b"}"),
        ARCHIVE_COMMANDS,
        r"compression method 12 \(bzip2\)",
    ),
    Case("zip_method_99", 5, _pt2_with_program(method=99), ARCHIVE_COMMANDS, r"compression method 99"),
    Case("zip_encrypted", 5, _pt2_with_program(flags=1), ARCHIVE_COMMANDS, r"it is encrypted"),
    Case("zip_deflate_ratio", 5, _deflate_bomb, ARCHIVE_COMMANDS, r"exceeds the budget max_ratio=1000"),
    Case("zip_lying_size", 5, _lying_size, ARCHIVE_COMMANDS, r"inflates past its declared size of 1000 bytes"),
    Case("zip_corrupt_deflate", 5, _corrupt_deflate, ARCHIVE_COMMANDS, r"corrupt deflate data \(.*invalid block type"),
    Case("aoti_method_12", 5, _aoti_package(12), NODES_COMMANDS, r"compression method 12"),
    # attack 6: tensor payloads checked before any allocation
    Case(
        "weight_zero_strides",
        6,
        _pt2_raw_weight([1 << 26, 4], [0, 0], b"\0" * 48),
        ("convert {file} {out}.pt2", "run {file} --inputs {inputs}"),
        r"materializes 1073741824 bytes from a storage of 48 - at `weights\['w'\]`",
    ),
    Case(
        "weight_numel_overflow",
        6,
        _pt2_raw_weight([1 << 62, 1 << 62], [0, 0], b"\0" * 48),
        ("convert {file} {out}.pt2", "run {file} --inputs {inputs}"),
        r"numel|elements",
    ),
    Case(
        "weight_negative_size",
        6,
        _archive_with_weight(sizes=[-1, 2]),
        ("convert {file} {out}.pt2", "run {file} --inputs {inputs}"),
        r"non-negative",
    ),
    Case(
        "weight_on_meta",
        6,
        _archive_with_weight(device={"type": "meta", "index": None}),
        ("run {file} --inputs {inputs}",),
        r"device 'meta' holds no data",
    ),
    Case(
        "weight_on_cuda",
        6,
        _archive_with_weight(device={"type": "cuda", "index": None}),
        ("run {file} --inputs {inputs}",),
        r"device 'cuda' is not available in this torch build",
    ),
    *(
        Case(
            f"device_{dev}",
            9,
            (lambda work, dev=dev: dev),
            DEVICE_COMMANDS,
            rf"device '{dev}' is not available in this torch build",
        )
        for dev in ("cuda", "xpu", "mtia", "hpu", "privateuseone", "cuda:7")
    ),
    Case("device_unknown", 9, lambda work: "banana", DEVICE_COMMANDS, r"--device 'banana': expected a device"),
    # issue 16/17: one deflated entry named by many weights; the .opw reader (docs/wire-format.md)
    Case(
        "zip_shared_entry_short",
        5,
        _pt2_shared_deflated_entry,
        ("convert {file} {out}.pt2", "run {file} --inputs {inputs}"),
        r"Expected a storage of at least 12582912 bytes",
    ),
    Case("opw_truncated", 6, _opw_with(lambda t: None, cut=7), OPW_OPEN_COMMANDS, r"the file is truncated"),
    Case(
        "opw_overlapping_blobs",
        6,
        _opw_with(lambda t: t["blobs"][2].__setitem__(0, t["blobs"][1][0])),
        OPW_OPEN_COMMANDS,
        r"overlaps the previous blob",
    ),
    Case(
        "opw_blob_past_end",
        6,
        _opw_with(lambda t: t["blobs"][1].__setitem__(1, 1 << 40)),
        OPW_OPEN_COMMANDS,
        r"run past the data section",
    ),
    Case(
        "opw_misaligned_blob",
        6,
        _opw_with(lambda t: t["blobs"][1].__setitem__(0, t["blobs"][1][0] + 4)),
        OPW_OPEN_COMMANDS,
        r"not aligned to 64 bytes",
    ),
    Case("opw_bad_blob_index", 6, _opw_with(_opw_tensor(blob=99)), OPW_OPEN_COMMANDS, r"weights\['w'\]\.blob"),
    Case(
        "opw_alias_cycle",
        6,
        _opw_with(lambda t: t["weights"].update(a={"alias": "weights/b"}, b={"alias": "weights/a"})),
        OPW_OPEN_COMMANDS,
        r"chains and cycles are refused",
    ),
    Case(
        "opw_huge_sizes",
        6,
        _opw_with(_opw_tensor(sizes=[1 << 40, 1 << 40], strides=[1 << 40, 1])),
        OPW_TENSOR_COMMANDS,
        r"64 bits|storage of at least",
    ),
    Case(
        "opw_dtype_size_mismatch",
        6,
        _opw_with(_opw_tensor(dtype=8, sizes=[3, 4], strides=[4, 1])),  # DOUBLE: twice the blob's bytes
        OPW_TENSOR_COMMANDS,
        r"Expected a storage of at least 96 bytes",
    ),
    Case(
        "opw_zero_strides",
        6,
        _opw_with(_opw_tensor(sizes=[1 << 26, 4], strides=[0, 0])),
        OPW_TENSOR_COMMANDS,
        r"materializes 1073741824 bytes from a storage of 48",
    ),
    # item 6: decoded-elements budget
    Case(
        "as_none_amplification",
        7,
        _as_none_node,
        ("inspect {file}",),
        r"exceeds the budget max_elements=\d+.*--max-elements",
    ),
    # attack 9: tracebacks instead of errors
    Case("deep_json", 9, _deep_json, ("inspect {file}", "convert {file} {out}.json"), r"nest|not valid JSON"),
    Case("deep_json_nodes", 9, _deep_object, NODES_COMMANDS[:1], r"nest"),
    Case("dev_zero", 9, lambda work: "/dev/zero", ("inspect {file}", "convert {file} {out}.json"), r"neither"),
    Case(
        "dev_zero_trace",
        9,
        lambda work: "/dev/zero",
        ("replay {file}", "diff {file} {trace}", "diff {trace} {file}"),
        r"/dev/zero: neither .* expected a trace",
    ),
    # every other place the CLI reads a file (issue 17: one opener, one byte budget, /dev/zero refused at once)
    Case(
        "dev_zero_program",
        9,
        lambda work: "/dev/zero",
        ("run {file} --inputs {inputs}", "view {file} --out {out}.html", "exec {file} --inputs {inputs}"),
        r"/dev/zero: neither a \.pt2 zip archive, JSON",
    ),
    Case(
        "dev_zero_snapshot",
        9,
        lambda work: "/dev/zero",
        ("ops bc-check {file}", "ops bc-check {file} {file}"),
        r"neither",
    ),
    Case(
        "dev_zero_findings",
        9,
        lambda work: "/dev/zero",
        ("view {program} --out {out}.html --findings {file}",),
        r"neither",
    ),
    Case(
        "dev_zero_saved_nodes",
        9,
        lambda work: "/dev/zero",
        ("run {program} --inputs {inputs} --compare-nodes {file}",),
        r"/dev/zero: neither .* expected a Values file",
    ),
    Case("dev_zero_idl", 9, lambda work: "/dev/zero", ("schema diff {file} {file}",), r"no such IDL file"),
    Case(
        "trace_tensor_frames",
        16,
        tensor_frames_trace,
        ("replay {file} --max-elements 100000", "diff {file} {file} --max-elements 100000"),
        r"frames\.trace@\d+: values decoded so far: more than 100000 exceeds the budget max_elements=100000.*"
        r"--max-elements",
    ),
    Case("strings_amplification", 16, _short_strings, ("inspect {file}",), r"exceeds the budget max_elements=2000000"),
    Case(
        "json_prescan_quadratic",
        16,
        _escaped_quotes,
        ("inspect {file} --max-elements 1000",),
        r"JSON values .* exceeds the budget max_elements=1000",
    ),
    Case("deep_json_trace", 9, _deep_object, ("replay {file}",), r"Expected a trace|nest"),
    Case(
        "trace_mutated_metadata",
        9,
        _mutated_metadata,
        ("replay {file}",),
        r"call 1 aten::add\.Tensor: metadata 'mutated' should be a JSON object of argument name",
    ),
    Case("dev_zero_inputs", 9, lambda work: "/dev/zero", VALUES_COMMANDS, r"/dev/zero: not a Values JSON object"),
]
