"""Serialized devices are honoured or refused, never swapped: renamed PrivateUse1 backends included."""

from __future__ import annotations

import textwrap

import pytest
import torch
from support.clirun import run_python

from opwire.proxy_executor import BindError, ProxyExecutor
from opwire.schema import models as m

_RENAMED = textwrap.dedent(
    """
    import torch
    from opwire.proxy_executor import ProxyExecutor
    from opwire.schema import models as m

    torch.utils.rename_privateuse1_backend("opwirepu")
    lib = torch.library.Library("opwire_pu", "DEF")
    lib.define("where(Tensor x, Device d) -> Tensor")
    seen = []

    def impl(x, d):
        seen.append(d)
        return x.clone()

    lib.impl("where", impl, "CPU")
    t = lambda n: m.Argument(as_tensor=m.TensorArgument(name=n))
    node = m.Node(target="opwire_pu::where", outputs=[t("out")], metadata={}, inputs=[
        m.NamedArgument(name="x", arg=t("x")),
        m.NamedArgument(name="d", arg=m.Argument(as_device=m.Device(type="opwirepu", index=1)))])
    ProxyExecutor().call(node, {"x": torch.ones(2)})
    print(seen[0].type, seen[0].index)
    """
)


def test_renamed_privateuse1_device_reaches_the_kernel() -> None:
    """rename_privateuse1_backend works once per process: run it in a child."""
    proc = run_python(_RENAMED)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert out.split() == ["opwirepu", "1"]


def _device_node(device: m.Device) -> m.Node:
    t = m.Argument(as_tensor=m.TensorArgument(name="out"))
    return m.Node(
        target="aten::zeros",
        inputs=[
            m.NamedArgument(name="size", arg=m.Argument(as_ints=[2])),
            m.NamedArgument(name="device", arg=m.Argument(as_device=device)),
        ],
        outputs=[t],
        metadata={},
    )


def test_serialized_device_is_honoured() -> None:
    out = ProxyExecutor().call(_device_node(m.Device(type="meta")), {})["out"]
    assert isinstance(out, torch.Tensor) and out.device.type == "meta"


def test_unknown_device_is_refused() -> None:
    with pytest.raises(BindError) as info:
        ProxyExecutor().call(_device_node(m.Device(type="opwire_nodev", index=0)), {})
    assert "device 'opwire_nodev:0' is not a device this torch knows" in str(info.value)
    assert "load the backend (or rename PrivateUse1) before running the file" in str(info.value)
