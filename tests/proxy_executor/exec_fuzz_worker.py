"""Child process of the executor fuzz test: builds a random node sequence from a seed and runs it, under a memory cap.

Protocol: one seed per stdin line; one JSON line back per seed, {"status": "ok" | "opwire" | "foreign",
"detail": str}. "opwire" means an OpwireError stopped the sequence (a kernel's own exception arrives as a
KernelError); "foreign" is any other exception, the bug this test looks for. A crash or a runaway
allocation kills the process, which the parent reports with the seed (rerun `program(seed)` to see it).
"""

from __future__ import annotations

import json
import math
import random
import resource
import sys
import traceback

if __name__ == "__main__":
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

import torch

from opwire.errors import OpwireError
from opwire.proxy_executor import ProxyExecutor
from opwire.proxy_executor.targets import resolve
from opwire.schema import models as m
from opwire.schema.opschema import OpSchema, op_schema

OPS = [
    "aten::add.Tensor", "aten::mul.Tensor", "aten::sub.Tensor", "aten::div.Tensor", "aten::full",
    "aten::zeros", "aten::ones", "aten::arange.start_step", "aten::reshape", "aten::view", "aten::permute",
    "aten::transpose.int", "aten::select.int", "aten::slice.Tensor", "aten::cat", "aten::stack",
    "aten::sum.dim_IntList", "aten::mean.dim", "aten::matmul", "aten::mm", "aten::relu", "aten::sigmoid",
    "aten::_softmax", "aten::expand", "aten::repeat", "aten::index_select", "aten::gather", "aten::clamp",
    "aten::where.self", "aten::fill_.Scalar", "aten::narrow", "aten::squeeze.dim", "aten::unsqueeze",
    "aten::flatten.using_ints", "aten::topk", "aten::sort", "aten::cumsum", "aten::pow.Tensor_Scalar",
    "aten::embedding", "aten::_to_copy", "aten::zeros_like", "aten::as_strided", "aten::new_empty_strided",
    "aten::constant_pad_nd", "aten::max_pool2d", "aten::conv2d", "aten::bmm", "aten::split.Tensor",
    "aten::unbind.int", "aten::index.Tensor", "aten::scatter.src", "aten::roll", "aten::flip",
]  # fmt: skip
SYM = ["_operator.add", "_operator.mul", "_operator.pow", "_operator.lshift", "_operator.floordiv",
       "_operator.mod", "torch.sym_int", "math.trunc", "operator.getitem"]  # fmt: skip
INTS = [0, 1, -1, 2, 3, 7, -7, 64, 2**31, 2**62, -(2**63), 2**63 - 1, 10**9, 10**5]
FLOATS = [0.0, 1.0, -1.5, float("nan"), float("inf"), float("-inf"), 1e308, -1e-308]
DTYPES = [
    m.ScalarType.FLOAT,
    m.ScalarType.LONG,
    m.ScalarType.BOOL,
    m.ScalarType.HALF,
    m.ScalarType.BYTE,
    m.ScalarType.COMPLEXFLOAT,
]


def _int(r: random.Random) -> int:
    return r.choice(INTS) if r.random() < 0.3 else r.randint(-3, 6)


def _tensor_arg(r: random.Random, names: list[str]) -> m.Argument:
    name = r.choice(names) if r.random() < 0.95 else "nowhere"
    return m.Argument(as_tensor=m.TensorArgument(name=name))


def _value(r: random.Random, type_str: str, names: list[str]) -> m.Argument | None:
    base = type_str.rstrip("?")
    if type_str.endswith("?") and r.random() < 0.3:
        return m.Argument(as_none=True)
    if r.random() < 0.05:  # the wrong member for the type
        return r.choice([m.Argument(as_string="x"), m.Argument(as_float=math.nan), m.Argument(as_bools=[True])])
    if base == "Tensor":
        return _tensor_arg(r, names)
    if base == "Tensor[]":
        return m.Argument(as_tensors=[_tensor_arg(r, names).as_tensor for _ in range(r.randint(0, 3))])
    if base in ("int", "SymInt"):
        return m.Argument(as_int=_int(r))
    if base in ("int[]", "SymInt[]") or base.startswith("int[") or base.startswith("SymInt["):
        return m.Argument(as_ints=[_int(r) for _ in range(r.randint(0, 4))])
    if base == "float":
        return m.Argument(as_float=r.choice(FLOATS))
    if base == "Scalar":
        return m.Argument(as_float=r.choice(FLOATS)) if r.random() < 0.5 else m.Argument(as_int=_int(r))
    if base == "bool":
        return m.Argument(as_bool=r.random() < 0.5)
    if base == "ScalarType":
        return m.Argument(as_scalar_type=r.choice(DTYPES))
    if base == "Tensor?[]":
        return m.Argument(as_optional_tensors=[m.OptionalTensorArgument(as_tensor=_tensor_arg(r, names).as_tensor)])
    return None  # leave it to the schema default (or the BindError for a missing required argument)


def _outputs(schema: OpSchema, r: random.Random, k: int) -> list[m.Argument]:
    outs = []
    for j, ret in enumerate(schema.returns):
        name = f"v{k}_{j}"
        if ret.type == "Tensor":
            outs.append(m.Argument(as_tensor=m.TensorArgument(name=name)))
        elif ret.type == "Tensor[]":
            outs.append(m.Argument(as_tensors=[m.TensorArgument(name=f"{name}_{e}") for e in range(r.randint(1, 3))]))
        else:
            outs.append(m.Argument(as_sym_int=m.SymIntArgument(as_name=name)))
    return outs


def program(seed: int) -> m.ExternKernelNodes:
    """The random node sequence of `seed`."""
    r = random.Random(seed)
    names, syms, nodes = ["a", "b", "i"], ["n"], []
    for k in range(r.randint(1, 6)):
        if r.random() < 0.15:
            fn = r.choice(SYM)
            ins = [
                m.NamedArgument(
                    name=p,
                    arg=m.Argument(as_sym_int=m.SymIntArgument(as_name=r.choice(syms)))
                    if r.random() < 0.3
                    else m.Argument(as_int=r.choice(INTS)),
                )
                for p in resolve(fn).params
            ]
            out = f"s{k}"
            nodes.append(
                m.Node(
                    target=fn, inputs=ins, outputs=[m.Argument(as_sym_int=m.SymIntArgument(as_name=out))], metadata={}
                )
            )
            syms.append(out)
            continue
        target = r.choice(OPS)
        ns, _, rest = target.partition("::")
        op, _, overload = rest.partition(".")
        schema = op_schema(getattr(getattr(getattr(torch.ops, ns), op), overload or "default"))
        inputs = []
        for a in schema.arguments:
            if a.has_default and r.random() < 0.5:
                continue
            v = _value(r, a.type, names)
            if v is not None:
                inputs.append(m.NamedArgument(name=a.name, arg=v))
        outs = _outputs(schema, r, k)
        nodes.append(m.Node(target=target, inputs=inputs, outputs=outs, metadata={}))
        names += [o.as_tensor.name for o in outs if o.as_tensor is not None]
        names += [t.name for o in outs if o.as_tensors is not None for t in o.as_tensors]
    return m.ExternKernelNodes(nodes=[m.ExternKernelNode(name=f"buf{i}", node=n) for i, n in enumerate(nodes)])


def _one(seed: int) -> dict[str, str]:
    values = {"a": torch.randn(2, 3), "b": torch.randn(3), "i": torch.tensor([0, 2, 1]), "n": 3}
    try:
        ex = ProxyExecutor(program(seed))
        for i in range(len(ex)):
            values.update(ex.call(i, values))
        return {"status": "ok", "detail": ""}
    except OpwireError as exc:
        return {"status": "opwire", "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
    except BaseException as exc:  # the bug this test looks for
        return {"status": "foreign", "detail": "".join(traceback.format_exception(exc))[-2000:]}


def main() -> None:
    """Serve seeds until stdin closes."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        sys.stdout.write(json.dumps(_one(int(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
