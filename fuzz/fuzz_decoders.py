"""atheris harness for every opwire decoder: Thrift binary, Thrift compact and JSON (`make fuzz`).

The first byte picks the codec and the root type, the rest is the input; anything but a valid model
or a DecodeError is a finding. Seeds are valid encodings written into the corpus directory on first run.

    python fuzz/fuzz_decoders.py fuzz/corpus -runs=200000 -rss_limit_mb=1024 -timeout=10
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    import opwire
    from opwire.errors import DecodeError
    from opwire.schema import models as m
    from opwire.serde import FORMATS, thrift

ROOTS = ("ExportedProgram", "Graph", "Node", "Argument", "Value", "Values", "CallTrace", "ExternKernelNodes")
CODECS = FORMATS  # every format opwire reads: json, binary, compact


def _seeds() -> dict[str, bytes]:
    """A few valid encodings per codec (framed and raw) to start mutating from."""
    node = m.Node(
        target="aten::add.Tensor",
        inputs=[
            m.NamedArgument(name="self", arg=m.Argument(as_tensor=m.TensorArgument(name="x"))),
            m.NamedArgument(name="alpha", arg=m.Argument(as_float=float("inf")), kind=m.ArgumentKind.KEYWORD),
        ],
        outputs=[m.Argument(as_tensor=m.TensorArgument(name="y"))],
        metadata={"stack_trace": "é"},
    )
    meta = m.TensorMeta(
        dtype=m.ScalarType.FLOAT,
        sizes=[m.SymInt(as_int=2), m.SymInt(as_expr=m.SymExpr(expr_str="s0", hint=m.SymExprHint(as_int=3)))],
        requires_grad=False,
        device=m.Device(type="cpu"),
        strides=[m.SymInt(as_int=1), m.SymInt(as_int=1)],
        storage_offset=m.SymInt(as_int=0),
        layout=m.Layout.Strided,
    )
    sub = m.Graph(inputs=[], outputs=[], nodes=[node], tensor_values={"x": meta}, sym_int_values={}, sym_bool_values={})
    cond = m.Node(
        target="torch.ops.higher_order.cond",
        inputs=[m.NamedArgument(name="true_fn", arg=m.Argument(as_graph=m.GraphArgument(name="t", graph=sub)))],
        outputs=[],
        metadata={},
    )
    graph = sub.model_copy(update={"nodes": [node, cond]})
    value = m.Value(as_list=[m.Value(as_dict={"a": m.Value(as_int=-1)}), m.Value(as_string="s")])
    seeds = {}
    for i, codec in enumerate(CODECS):
        for root, obj in (("Graph", graph), ("Node", node), ("Value", value)):
            j = i * len(ROOTS) + ROOTS.index(root)
            seeds[f"{codec}_{root}"] = bytes([j]) + opwire.dumps(obj, codec)  # type: ignore[arg-type]
            if codec != "json":
                seeds[f"{codec}_{root}_raw"] = bytes([j]) + thrift.encode(obj, codec, framed=False)  # type: ignore[arg-type]
    return seeds


def test_one_input(data: bytes) -> None:
    """Decode one fuzzer input; only DecodeError may escape as a failure mode."""
    if not data:
        return
    pick = data[0] % (len(ROOTS) * len(CODECS))
    codec, root = CODECS[pick // len(ROOTS)], ROOTS[pick % len(ROOTS)]
    try:
        obj = opwire.loads(data[1:], m.MODELS[root], codec)  # type: ignore[arg-type]
    except DecodeError:
        return
    again = opwire.loads(opwire.dumps(obj, codec), m.MODELS[root], codec)  # type: ignore[arg-type]
    assert type(again) is type(obj)


def main() -> None:
    """Write the seeds into the corpus directory (first argument) and run atheris."""
    corpus = Path(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None
    if corpus is not None:
        corpus.mkdir(parents=True, exist_ok=True)
        for name, seed in _seeds().items():
            (corpus / name).write_bytes(seed)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
