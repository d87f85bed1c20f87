"""opwire's strict grammar for `SymExpr.expr_str`: what torch's export writes passes, nothing evaluable else."""

from __future__ import annotations

import json
import re

import pytest

import opwire
from opwire.schema import models as m
from opwire.schema import symexpr
from opwire.schema.symexpr import MAX_EXPR_DEPTH, check_expr
from opwire.schema.symexpr_fold import MAX_CONST_BITS
from opwire.serde import DecodeError

ACCEPTED = [
    # srepr, as torch 2.13 writes (from the corpus)
    "Symbol('s77', positive=True, integer=True)",
    "Add(Symbol('s17', positive=True, integer=True), Symbol('s77', positive=True, integer=True))",
    "Mul(Float('0.5', precision=53), ToFloat(Symbol('s77', positive=True, integer=True)))",
    "StrictGreaterThan(Symbol('s77', positive=True, integer=True), Integer(4))",
    "Mul(Integer(-1), Rational(1, 2), Symbol('u0', integer=True))",
    "Pow(Symbol('s0', integer=True), Integer(2))",
    # infix, as older exports wrote
    "s0 + 1",
    "2*s0 - s1//3 + s2 % 4",
    "Max(2, s1) <= FloorDiv(s0, 2)*3 + -1",
    "Eq(Mod(s0, 2), 0) & ~(s1 > 3) | Ne(s0, 1)",
    "CeilDiv(s0, 64)*64",
    "s0**2 + 2**s1 + 2**64",
    "PythonMod(s0, 3) + ModularIndexing(s0, 1, 4) + Where(s0 > 1, s0, 1)",
    "True",
    "-oo < s0",
]


@pytest.mark.parametrize("expr", ACCEPTED)
def test_what_torch_writes_is_accepted(expr: str) -> None:
    assert check_expr(expr) == expr
    assert m.SymExpr(expr_str=expr).expr_str == expr


REFUSED = [
    ("__import__('os').system('id')", "'__import__' at position 0 is not a function torch's export writes"),
    ("s0.__class__", "unexpected character '.' at position 2"),
    ("exec('1')", "'exec' at position 0 is not a function"),
    ("open", "'open' at position 0 is not a symbol name"),
    ("_private", "'_private' at position 0 is not a symbol name"),
    ("Symbol('x'); 1", "unexpected character ';'"),
    ("s0[0]", "unexpected character '['"),
    ("Symbol(s0)", "expected a quoted symbol name"),
    ("Symbol('s0', foo=True)", "keyword 'foo' at position 13"),
    ("Integer('1')", "expected a number at position 8"),
    ("'text'", "expected a number, a symbol, a call or '('"),
    ("2**2**2**2**2**2", "an exponent of 65536"),
    ("Pow(10, 100)**100", f"a power of more than {MAX_CONST_BITS} bits"),
    ("1" * 400, "integer literal of 400 digits"),
    ("(" * (MAX_EXPR_DEPTH + 1) + "1" + ")" * (MAX_EXPR_DEPTH + 1), f"nesting deeper than {MAX_EXPR_DEPTH}"),
    ("", "an empty symbolic expression"),
    ("s0 +", "expected a number, a symbol, a call or '(' at position 4, got 'the end'"),
    ("Symbol('a b')", "expected a quoted symbol name"),
]


@pytest.mark.parametrize(("expr", "message"), REFUSED)
def test_anything_else_is_refused_with_the_position(expr: str, message: str) -> None:
    with pytest.raises(
        ValueError, match="^" + re.escape(f"not a symbolic expression torch's export writes: {message}")
    ):
        check_expr(expr)


def test_decoding_names_the_path(fmt: str) -> None:
    good = m.SymInt(as_expr=m.SymExpr(expr_str="s0 + 1"))
    data = opwire.dumps(
        m.TensorMeta(
            dtype=m.ScalarType.FLOAT,
            sizes=[good],
            requires_grad=False,
            device=m.Device(type="cpu"),
            strides=[m.SymInt(as_int=1)],
            storage_offset=m.SymInt(as_int=0),
            layout=m.Layout.Strided,
        ),
        format=fmt,
    )  # type: ignore[arg-type]
    evil = data.replace(b"s0 + 1", b"s0.a__")
    with pytest.raises(DecodeError, match=r"unexpected character '\.'.* - at `sizes\[0\]\.as_expr\.expr_str`"):
        opwire.loads(evil, m.TensorMeta, format=fmt)  # type: ignore[arg-type]


def test_every_corpus_expression_passes(corpus_programs: list[object]) -> None:
    seen = 0
    for prog in corpus_programs:
        for raw in re.findall(rb'"expr_str": ("(?:[^"\\]|\\.)*")', prog.json_bytes):  # type: ignore[attr-defined]
            check_expr(json.loads(raw))
            seen += 1
    assert seen


def test_an_accepted_expression_is_remembered_and_a_refused_one_refused_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """check_expr remembers the short expressions it accepted (a program reads each several times): the answer for a
    string does not change with what was checked before, nor once the memory is full and starts again."""
    monkeypatch.setattr(symexpr, "_ACCEPTED_MAX", 20)
    refused = "s0 +"
    for i in range(50):
        text = f"s{i} + {i}"
        assert check_expr(text) is text
        assert check_expr(text) is text
        with pytest.raises(ValueError, match=r"not a symbolic expression"):
            check_expr(refused)
    assert len(symexpr._accepted) <= 20
    long = " + ".join(f"s{i}" for i in range(100))  # past the remembered length: parsed each time
    assert check_expr(long) is long and long not in symexpr._accepted
