"""Real exported programs (tests/support/corpus.py) through opwire's JSON codec, and back into torch.

For every corpus program, in training IR and decomposed: torch's JSON -> models -> JSON is
byte-identical; torch's own deserializer loads opwire's bytes and the program matches eager; the
same JSON written the way another writer may write it (other whitespace, other key order, unknown
keys, raw UTF-8) decodes to the same model, and so does the JSON torch's C++ serializer writes.
Finally, the corpus must exercise the `Argument` union.
"""

from __future__ import annotations

import collections
import difflib
import json
import random
from typing import Any

import pytest
import torch
from support import corpus
from support.typed import assert_same_model
from torch._export.serde.serialize import deserialize
from torch.utils import _pytree as pytree

import opwire
from opwire.schema import models as m
from opwire.schema.idl import TypeRef

_ROOT = TypeRef("struct", "ExportedProgram")
_INDENTS: list[int | str] = [1, 2, "\t"]

# The Argument members torch 2.13's serializer emits for the corpus (checked across all programs).
# Not emitted by torch.export + serialize for any model we could build: as_optional_tensor (only
# inductor's extern kernel nodes write it), as_sym_floats, as_sym_bools, as_nested_tensors,
# as_int_lists, as_float_lists, as_string_to_argument (only higher-order ops that do not serialize
# today, e.g. flex_attention), as_custom_obj (needs a torchbind class or opaque type).
EXPECTED_ARGUMENT_MEMBERS = {
    "as_tensor": "every model",
    "as_tensors": "lstm (flat weights), cond (operands), custom_op (Tensor[] output)",
    "as_int": "mlp (softmax dim)",
    "as_ints": "conv_bn (stride/padding)",
    "as_float": "conv_bn (momentum, eps)",
    "as_floats": "argkinds (interpolate scale_factor=[..])",
    "as_string": "argkinds (rounding_mode, approximate, einsum)",
    "as_strings": "custom_op (str[])",
    "as_sym_int": "dynamic (sym_size)",
    "as_sym_ints": "dynamic (reshape to symbolic sizes)",
    "as_sym_float": "dynamic (size * 0.5)",
    "as_sym_bool": "dynamic (cond on size > 4)",
    "as_scalar_type": "argkinds (to(dtype=...))",
    "as_memory_format": "argkinds (contiguous(memory_format=...))",
    "as_layout": "argkinds (zeros(layout=...))",
    "as_device": "argkinds (zeros(device=...))",
    "as_bool": "argkinds (keepdim)",
    "as_bools": "custom_op (bool[])",
    "as_none": "argkinds (clamp(min=None))",
    "as_graph": "cond (branches)",
    "as_optional_tensors": "argkinds (x[:, idx]), custom_op (Tensor?[])",
    "as_complex": "complex (x * (1+2j))",
    "as_operator": "counter/decomposed (auto_functionalized_v2 of a mutating custom op)",
}


def _first_difference(expected: bytes, got: bytes, window: int = 400) -> str:
    """A short unified diff around the first byte where `got` departs from `expected`."""
    at = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
    lo = max(0, at - window)

    def lines(data: bytes, end: int) -> list[str]:
        text = data[lo:end].decode("utf-8", "replace")
        return [part + "\n" for part in text.split(", ")]

    before = lines(expected, at + window)
    after = lines(got, at + window + len(got) - len(expected))
    diff = difflib.unified_diff(before, after, "torch", "opwire", n=2)
    return f"first difference at byte {at} (torch {len(expected)} bytes, opwire {len(got)}):\n" + "".join(diff)


def _walk(value: Any, t: TypeRef, visit: Any) -> Any:
    """Rebuild raw JSON data of IDL type `t`, calling visit(struct_name, kind, dict) on every struct/union."""
    if value is None:
        return None
    if t.kind in ("list", "set"):
        return [_walk(v, t.args[0], visit) for v in value]
    if t.kind == "map":
        return {k: _walk(v, t.args[1], visit) for k, v in value.items()}
    if t.kind != "struct":
        return value
    sdef = m.SCHEMA.structs[str(t.name)]
    types = {f.name: f.type for f in sdef.fields}
    rebuilt = {k: _walk(v, types[k], visit) for k, v in value.items()}
    return visit(sdef.name, sdef.kind, rebuilt)


def _members(raw: bytes) -> dict[str, collections.Counter[str]]:
    """union name -> how often each member is set, across one serialized program."""
    found: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    def visit(name: str, kind: str, d: dict[str, Any]) -> dict[str, Any]:
        if kind == "union":
            found[name].update(d.keys())
        return d

    _walk(json.loads(raw), _ROOT, visit)
    return found


def _cpp_style(raw: bytes, seed: int) -> bytes:
    """The same program with other whitespace, shuffled keys, unknown struct keys and raw UTF-8."""
    rng = random.Random(seed)

    def visit(name: str, kind: str, d: dict[str, Any]) -> dict[str, Any]:
        items = list(d.items())
        if kind == "struct":  # a union's extra key would be a second member, so only structs get them
            items.append((f"unknown_{name.lower()}", {"added": [1, 2.5, None, "by a newer writer"]}))
        rng.shuffle(items)
        return dict(items)

    data = _walk(json.loads(raw), _ROOT, visit)
    return json.dumps(data, indent=rng.choice(_INDENTS), separators=(",", " : "), ensure_ascii=False).encode()


def _clone(tree: Any) -> Any:
    return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, tree)


def test_json_round_trip_is_byte_identical(corpus_program: corpus.SerializedProgram) -> None:
    raw = corpus_program.json_bytes
    out = opwire.dumps(opwire.loads(raw, m.ExportedProgram))
    if out != raw:
        pytest.fail(f"{corpus_program.name}: " + _first_difference(raw, out), pytrace=False)


def test_torch_deserializer_runs_opwire_json(corpus_program: corpus.SerializedProgram) -> None:
    prog = corpus_program
    ours = opwire.dumps(opwire.loads(prog.json_bytes, m.ExportedProgram))
    loaded = deserialize(prog.artifact(ours)).module()
    eager, _, _ = prog.fresh()
    for args, kwargs in prog.spec.inputs():
        for _call in range(2):  # twice: mutated buffers must carry over
            expected = eager(*_clone(args), **_clone(kwargs))
            got = loaded(*_clone(args), **_clone(kwargs))
            torch.testing.assert_close(got, expected, equal_nan=True, msg=lambda s: f"{prog.name}: {s}")
    torch.testing.assert_close(dict(loaded.named_buffers()), dict(eager.named_buffers()))


def test_cpp_style_json_decodes_to_the_same_model(corpus_program: corpus.SerializedProgram) -> None:
    raw = corpus_program.json_bytes
    variant = _cpp_style(raw, seed=len(raw))
    assert variant != raw
    model = opwire.loads(variant, m.ExportedProgram)
    assert_same_model(model, opwire.loads(raw, m.ExportedProgram))
    assert opwire.dumps(model) == raw


def test_torch_cpp_serializer_json_decodes_to_the_same_program(corpus_program: corpus.SerializedProgram) -> None:
    """JSON from torch's C++ serializer (compact, maps in sorted key order) reads into the same program."""
    raw = corpus_program.json_bytes
    cpp = torch._C._export.serialize_exported_program(torch._C._export.deserialize_exported_program(raw.decode()))
    cpp_bytes = cpp.encode("utf-8")
    assert cpp_bytes != raw
    ours = opwire.dumps(opwire.loads(cpp_bytes, m.ExportedProgram))
    # The same program up to the order of map entries (thrift maps are unordered; C++ writes std::map order).
    # Compared with what C++ wrote, not with torch's Python JSON: torch 2.13's C++ round trip turns
    # "-Infinity" into "Infinity" (transformer/decomposed, nonfinite/*), and opwire must read what is there.
    assert _canonical(ours) == _canonical(cpp_bytes)


def _canonical(raw: bytes) -> str:
    return json.dumps(json.loads(raw), sort_keys=True)


def test_corpus_covers_the_argument_union(corpus_programs: list[corpus.SerializedProgram]) -> None:
    seen: collections.Counter[str] = collections.Counter()
    for prog in corpus_programs:
        seen.update(_members(prog.json_bytes)["Argument"])
    known = {f.name for f in m.SCHEMA.structs["Argument"].fields}
    assert set(EXPECTED_ARGUMENT_MEMBERS) <= known
    missing = sorted(set(EXPECTED_ARGUMENT_MEMBERS) - set(seen))
    assert not missing, f"no corpus program sets Argument members {missing}; seen: {dict(seen)}"


def test_corpus_has_both_irs_of_every_model(corpus_programs: list[corpus.SerializedProgram]) -> None:
    assert len(corpus.model_names()) >= 12
    by_model: dict[str, dict[str, bytes]] = collections.defaultdict(dict)
    for prog in corpus_programs:
        by_model[prog.model][prog.ir] = prog.json_bytes
    for model, irs in by_model.items():
        assert set(irs) == set(corpus.IRS), model
    # decomposition must change something in the models with non-core ops (else the IRs are one test twice)
    changed = [model for model, irs in by_model.items() if irs["training"] != irs["decomposed"]]
    assert len(changed) >= 10, f"run_decompositions changed only {changed}"
