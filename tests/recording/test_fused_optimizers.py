"""Training steps with fused and foreach optimizers: their kernels write lists of tensors (`Tensor(a!)[]`), and a
chained replay sees every written list, so later calls (the next step's forward) read the updated parameters."""

from __future__ import annotations

import pytest
import torch

import opwire
from opwire.recording.arguments import to_argument
from opwire.recording.mutations import written_arguments
from opwire.schema.opschema import op_schema


def _train(**impl: bool) -> opwire.Trace:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, **impl)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    with opwire.record() as trace:
        for _ in range(2):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
        model(x).sum()
    return trace


@pytest.mark.parametrize(
    ("impl", "writer"),
    [({"fused": True}, "aten::_fused_adamw_.default"), ({"foreach": True}, "aten::_foreach_mul_.Scalar")],
)
def test_a_two_step_fused_or_foreach_training_loop_replays_chained_with_equal_outputs(
    impl: dict[str, bool], writer: str
) -> None:
    trace = _train(**impl)
    assert not [r.target for r in trace.records if "skipped" in r.metadata]
    steps = [r for r in trace.records if r.target == writer]
    assert len(steps) >= 2, sorted({r.target for r in trace.records})
    written = written_arguments(steps[0], writer)
    assert len(written["self"]) == 4  # the four parameters, each written in place
    for mode in ("chained", "isolated"):
        report = opwire.replay(trace, mode=mode, progress=False)  # type: ignore[arg-type]
        assert report.ok and report.complete and report.replayed == len(trace), str(report)


def test_an_empty_tensor_list_is_written_as_the_member_the_schema_allows() -> None:
    """`max_exp_avg_sqs=[]` (AdamW without amsgrad) is an empty `as_tensors`, not an `as_ints` the schema refuses."""
    schema = op_schema(torch.ops.aten._fused_adamw_.default)
    arg = next(a for a in schema.arguments if a.name == "max_exp_avg_sqs")
    assert to_argument([], arg, schema.qualname, str).type == "as_tensors"
    floats = op_schema(torch.ops.aten._foreach_add_.ScalarList)
    scalars = next(a for a in floats.arguments if a.name == "scalars")
    assert to_argument([], scalars, floats.qualname, str).value == []
