"""opwire's error helpers."""

from __future__ import annotations

import pytest

import opwire
from opwire.errors import describe_exception, first_line


def test_foreign_exception_lines() -> None:
    assert first_line(RuntimeError("boom\nstack...")) == "boom"
    assert first_line(ValueError("")) == "ValueError"
    assert describe_exception(RuntimeError("  boom  \nmore")) == "RuntimeError: boom"
    assert describe_exception(KeyError()) == "KeyError"


@pytest.mark.parametrize(
    "cls", [opwire.DecodeError, opwire.EncodeError, opwire.BindError, opwire.UnknownTargetError, opwire.KernelError]
)
def test_every_error_derives_from_the_root(cls: type[Exception]) -> None:
    assert issubclass(cls, opwire.OpwireError)
    assert issubclass(opwire.UnknownTargetError, opwire.BindError)
