"""`make demo` keeps working: every check it prints passes."""

from __future__ import annotations

import pytest

from opwire import demo


def test_demo_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out
    assert out.rstrip().endswith(demo.NEXT_STEPS.strip())
    assert "what to try next" in out and "opwire record --out train.trace -- python train.py" in out
    assert "NO" not in out.split("2. record and replay")[0].split("-\n", 1)[1]
