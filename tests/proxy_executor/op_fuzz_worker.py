"""Child process of the per-op fuzz: calls one allowlisted op with hostile index-like and size-like arguments.

Protocol: one `op seed` per stdin line; one JSON line back, {"status": "ok" | "opwire" | "foreign",
"detail": str}. The call goes through `ProxyExecutor.call`, so the allowlist's preconditions and the
execution budgets apply exactly as they do for a file. A crash (a signal) or a hang is what the parent
(op_fuzz.py) looks for: it names the op and the seed, and `case(op, seed)` rebuilds the node.
"""

from __future__ import annotations

import json
import random
import re
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
from opwire.schema.ops import OpArg

MAX_MEMORY = 256 << 20  # the execution-memory budget of each case: a size bomb is a BudgetError, not a slow fill
INDEX_NAMES = re.compile(r"ind|offset|length|target|crow|col|row|perm|lengths|counts|batch|mask", re.IGNORECASE)
HOSTILE_INTS = [0, 1, -1, 2, 3, 5, -7, 63, 2**31, -(2**31), 2**62, -(2**62), 10**8, -(10**8)]
FLOATS = [0.0, 1.0, -1.0, 0.5, 1e30, -1e30, float("nan"), float("inf"), 1e-30]
DTYPES = [m.ScalarType.FLOAT, m.ScalarType.LONG, m.ScalarType.INT, m.ScalarType.BOOL, m.ScalarType.DOUBLE,
          m.ScalarType.HALF, m.ScalarType.BYTE]  # fmt: skip


def pool() -> dict[str, torch.Tensor]:
    """The tensors every case draws from: data of several ranks, and index tensors with hostile values."""
    g = torch.Generator().manual_seed(0)
    return {
        "f1": torch.randn(6, generator=g),
        "f2": torch.randn(2, 3, generator=g),
        "f3": torch.randn(2, 3, 4, generator=g),
        "f4": torch.randn(1, 2, 4, 4, generator=g),
        "f5": torch.randn(1, 2, 2, 4, 4, generator=g),
        "f0": torch.tensor(1.5),
        "fe": torch.empty(0, 3),
        "ft": torch.randn(3, 2, generator=g).t(),
        "i_ok": torch.tensor([0, 1, 2]),
        "i_big": torch.tensor([0, 10**8, 1]),
        "i_neg": torch.tensor([-(10**8), 0, 1]),
        "i_huge": torch.tensor([2**62, -(2**62), 0]),
        "i_2d": torch.tensor([[0, 5], [2**40, -3]]),
        "i_4d": torch.full((1, 2, 2, 2), 10**8),
        "i32": torch.tensor([0, 2**30, -5], dtype=torch.int32),
        "b": torch.tensor([True, False, True]),
        "b2": torch.ones(2, 3, dtype=torch.bool),
        "u8": torch.tensor([0, 255, 7], dtype=torch.uint8),
    }


NAMES = list(pool())
INDEX_POOL = [n for n in NAMES if n.startswith("i")]


def _int(r: random.Random) -> int:
    return r.choice(HOSTILE_INTS) if r.random() < 0.6 else r.randint(-3, 8)


def _tensor(r: random.Random, name: str) -> m.TensorArgument:
    index_like = INDEX_NAMES.search(name) is not None
    return m.TensorArgument(name=r.choice(INDEX_POOL if index_like and r.random() < 0.8 else NAMES))


def _value(r: random.Random, a: OpArg) -> m.Argument | None:
    base = a.type.rstrip("?")
    if a.type.endswith("?") and r.random() < 0.25:
        return m.Argument(as_none=True)
    if base == "Tensor":
        return m.Argument(as_tensor=_tensor(r, a.name))
    if base == "Tensor[]":
        return m.Argument(as_tensors=[_tensor(r, a.name) for _ in range(r.randint(1, 3))])
    if base == "Tensor?[]":
        return m.Argument(as_optional_tensors=[m.OptionalTensorArgument(as_tensor=_tensor(r, "indices"))])
    if base in ("int", "SymInt"):
        return m.Argument(as_int=_int(r))
    if base.startswith(("int[", "SymInt[")):
        return m.Argument(as_ints=[_int(r) for _ in range(r.randint(0, 4))])
    if base == "float":
        return m.Argument(as_float=r.choice(FLOATS))
    if base == "float[]":
        return m.Argument(as_floats=[r.choice(FLOATS) for _ in range(r.randint(0, 3))])
    if base == "Scalar":
        return m.Argument(as_int=_int(r)) if r.random() < 0.5 else m.Argument(as_float=r.choice(FLOATS))
    if base == "bool":
        return m.Argument(as_bool=r.random() < 0.5)
    if base == "bool[]" or base.startswith("bool["):
        return m.Argument(as_bools=[r.random() < 0.5 for _ in range(r.randint(0, 3))])
    if base == "ScalarType":
        return m.Argument(as_scalar_type=r.choice(DTYPES))
    return None


def _outputs(returns: tuple[OpArg, ...], r: random.Random) -> list[m.Argument]:
    outs = []
    for j, ret in enumerate(returns):
        t = ret.type.rstrip("?")
        if t == "Tensor":
            outs.append(m.Argument(as_tensor=m.TensorArgument(name=f"o{j}")))
        elif t == "Tensor[]":
            outs.append(m.Argument(as_tensors=[m.TensorArgument(name=f"o{j}_{e}") for e in range(r.randint(1, 3))]))
        elif t in ("int", "SymInt"):
            outs.append(m.Argument(as_sym_int=m.SymIntArgument(as_name=f"o{j}")))
        elif t == "float":
            outs.append(m.Argument(as_sym_float=m.SymFloatArgument(as_name=f"o{j}")))
        elif t == "bool":
            outs.append(m.Argument(as_sym_bool=m.SymBoolArgument(as_name=f"o{j}")))
        elif t == "Scalar":
            outs.append(m.Argument(as_float=0.0))
        else:
            outs.append(m.Argument(as_none=True))
    return outs


def case(op: str, seed: int) -> m.Node:
    """The fuzzed call of `op` for `seed`: every argument drawn (defaults kept half the time)."""
    r = random.Random(f"{op}/{seed}")
    schema = resolve(op).schema
    assert schema is not None
    inputs = []
    for a in schema.arguments:
        if a.has_default and r.random() < 0.4:
            continue
        v = _value(r, a)
        if v is not None:
            inputs.append(m.NamedArgument(name=a.name, arg=v))
    return m.Node(target=op, inputs=inputs, outputs=_outputs(schema.returns, r), metadata={})


def _one(op: str, seed: int, ex: ProxyExecutor) -> dict[str, str]:
    values = pool()  # fresh each case: in-place ops must not carry hostile values over
    try:
        ex.call(case(op, seed), values)
        return {"status": "ok", "detail": ""}
    except OpwireError as exc:
        return {"status": "opwire", "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
    except BaseException as exc:
        return {"status": "foreign", "detail": "".join(traceback.format_exception(exc))[-1500:]}


def main() -> None:
    """Serve `op seed` lines until stdin closes."""
    import warnings

    warnings.simplefilter("ignore")
    ex = ProxyExecutor(max_memory=MAX_MEMORY)
    _one("aten::add.Tensor", 0, ex)  # the first call's lazy imports are not a case's time
    # nor is torch._dynamo's (~800 modules, 5-10 s on a loaded machine): the first op whose meta estimate runs a
    # Python reference imports it (torch._compile's disable-dynamo wrapper), and would count as a hang
    import torch._dynamo  # noqa: F401

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        op, seed = line.split()
        sys.stdout.write(json.dumps(_one(op, int(seed), ex)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
