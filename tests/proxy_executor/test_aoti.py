"""One real AOTInductor round trip: compile, take the extern-node JSON out of the .pt2, replay it."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from support import aoti_model

from opwire.cli import main
from opwire.proxy_executor import ProxyExecutor
from opwire.schema import models as m
from opwire.serde.tensors import from_tensor


@pytest.mark.slow
def test_aoti_round_trip(tmp_path: Path, aoti_package: Path) -> None:
    x, b = aoti_model.inputs()
    package = str(aoti_package)
    compiled = torch._inductor.aoti_load_package(package)
    expected = aoti_model.Model()(x, b)
    assert torch.allclose(compiled(x, b), expected)

    ex = ProxyExecutor(package)
    assert [ek.node.target for ek in ex.nodes.nodes] == ["opwire_aoti_test::foo", "opwire_aoti_test::multi"]
    wrapper = next(n for n in zipfile.ZipFile(package).namelist() if n.endswith(".wrapper.cpp"))
    cpp = zipfile.ZipFile(package).read(wrapper).decode()
    assert "std::array<int64_t, 4>{3, 1, 0, 4}" in cpp  # the layout the compiled wrapper passes
    assert ex.layout(0) == "int_args (4): n, dims[2], k; tensor_args (3): x, bias, <out 0>"

    # call_function exactly as the compiled wrapper does
    names = [ek.node.inputs[0].arg.value.name for ek in ex.nodes.nodes]
    slots0: list[Any] = [x, b, None]
    (y,) = ex.call_function(0, [3, 1, 0, 4], slots0)
    slots1: list[Any] = [y, None, None, None]
    a, b0, b1 = ex.call_function(1, [2, 3, 2], slots1)
    assert torch.allclose(torch.relu(a) + b0 + b1, expected)

    # call by name, chaining outputs
    env: dict[str, object] = {names[0]: x, ex.nodes.nodes[0].node.inputs[-2].arg.value.name: b}
    for i in range(len(ex)):
        env.update(ex.call(i, env))
    outs = ex.nodes.nodes[1].node.outputs
    a2 = env[outs[0].as_tensor.name]  # type: ignore[union-attr]
    bs2 = [env[t.name] for t in outs[1].as_tensors]  # type: ignore[union-attr]
    assert torch.allclose(torch.relu(a2) + bs2[0] + bs2[1], expected)  # type: ignore[operator, call-overload]

    # the CLI runs the same package
    values = m.Values(values={"arg0_1": m.Value(as_tensor=from_tensor(x)), "arg1_1": m.Value(as_tensor=from_tensor(b))})
    inputs = tmp_path / "inputs.json"
    inputs.write_bytes(values.model_dump_json().encode())
    out_json = tmp_path / "out.txt"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["exec", package, "--inputs", str(inputs), "--json"]) == 0
    report = json.loads(buf.getvalue())
    out_json.write_text(buf.getvalue())
    assert report["ok"] and [n["name"] for n in report["nodes"]] == ["buf0", "buf2"]
