"""opwire's own strict parser for symbolic expression strings (`SymExpr.expr_str`), run before sympy sees one.

torch's deserializer hands `expr_str` to `sympy.sympify`, which is Python's `eval` over sympy's namespace
and the builtins: a file could run any code through it, or make sympy fold `2**10**10` for hours. This
module accepts only what torch's export writes: both the `srepr` form torch 2.13 writes
(`Add(Symbol('s0', integer=True, positive=True), Integer(1))`) and the infix form older exports wrote
(`s0 + 1`, `Max(2, s1)`, `FloorDiv(s0, 2)`): symbols, numbers, `+ - * / // % **`, comparisons, `& | ~`,
calls of the functions in `FUNCTIONS` (derived from torch: see symexpr_gen.py),
sympy assumption keywords, and quoted strings only as the name of a `Symbol` or the digits of a `Float`.
Constant subexpressions are folded here (by the rules of symexpr_fold.py) with a bound on their size, so
sympy never meets a huge power.
`check_expr` raises ValueError with the position of the first problem; the models run it on every
`SymExpr.expr_str`, so decoding turns it into a DecodeError with the path.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

from opwire.schema.symexpr_fold import MAX_CONST_BITS, Val, fold_add, fold_mul, fold_pow, fold_shrink, symbolic
from opwire.schema.symexpr_names import PRINTED_FUNCTIONS, TORCH_FUNCTIONS

__all__ = [
    "CONSTANTS",
    "FUNCTIONS",
    "KEYWORDS",
    "MAX_EXPR_CHARS",
    "MAX_EXPR_DEPTH",
    "MAX_FLOAT_PRECISION",
    "check_expr",
]

MAX_EXPR_CHARS = 100_000
"""Longest expression string accepted."""

MAX_EXPR_DEPTH = 30
"""Deepest nesting of parentheses, calls, unary operators and powers accepted (sympy's parser and this one
recurse on it; torch's expressions nest a handful of levels)."""

MAX_FLOAT_PRECISION = MAX_CONST_BITS
"""Largest `Float(..., precision=)` accepted, in bits (torch writes 53; sympy's arithmetic grows with it)."""

# Functions torch's export writes, derived from the installed torch by symexpr_gen.py and committed as data
# (symexpr_names.py; a test regenerates it and fails with a diff on drift): the function classes of
# `torch.utils._sympy.functions` and the names sympy's printers emit for torch's symbolic-shape handlers.
_LITERAL_FUNCTIONS = {"Symbol", "Integer", "Float", "Rational"}  # srepr's atoms, checked argument by argument
FUNCTIONS = frozenset(TORCH_FUNCTIONS | PRINTED_FUNCTIONS | _LITERAL_FUNCTIONS)
"""Every name that may be called."""

CONSTANTS = frozenset({"True", "False", "true", "false", "oo", "zoo", "nan"})
"""Bare names that are constants, not symbols."""

KEYWORDS = frozenset({
    "integer", "real", "positive", "negative", "nonnegative", "nonpositive", "zero", "nonzero", "finite",
    "infinite", "even", "odd", "rational", "irrational", "commutative", "extended_real", "precision",
    "evaluate",
})  # fmt: skip
"""Keyword arguments a call may pass (sympy assumptions, Float's precision)."""

_SYMBOL = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?|\d+)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<str>'[^'\\\n]*'|\"[^\"\\\n]*\")"
    r"|(?P<op>\*\*|//|<=|>=|==|!=|[-+*/%<>&|~(),=]))"
)
_RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins))
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}


@dataclass(frozen=True)
class _Tok:
    kind: str  # num | name | str | op | end
    text: str
    pos: int


def _tokens(text: str) -> Iterator[_Tok]:
    pos, end = 0, len(text)
    while pos < end:
        mt = _TOKEN.match(text, pos)
        if mt is None or mt.end() == pos:
            rest = text[pos:].lstrip()
            if not rest:
                break
            at = end - len(rest)
            raise ValueError(f"unexpected character {rest[0]!r} at position {at}")
        kind = mt.lastgroup
        assert kind is not None
        yield _Tok(kind, mt.group(kind), mt.start(kind))
        pos = mt.end()
    yield _Tok("end", "", end)


class _Parser:
    def __init__(self, text: str) -> None:
        self._gen = _tokens(text)  # lazily: the first problem in reading order is the one reported
        self.toks: list[_Tok] = []
        self.i = 0
        self.depth = 0

    def at(self, k: int) -> _Tok:
        while len(self.toks) <= k:
            if self.toks and self.toks[-1].kind == "end":
                return self.toks[-1]
            self.toks.append(next(self._gen))
        return self.toks[k]

    @property
    def tok(self) -> _Tok:
        return self.at(self.i)

    def take(self) -> _Tok:
        t = self.at(self.i)
        self.i += 1
        return t

    def expect(self, text: str) -> None:
        t = self.take()
        if t.text != text or t.kind not in ("op",):
            raise ValueError(f"expected {text!r} at position {t.pos}, got {t.text or 'the end'!r}")

    def fail(self, what: str) -> ValueError:
        t = self.tok
        return ValueError(f"{what} at position {t.pos}, got {t.text or 'the end'!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_EXPR_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_EXPR_DEPTH}")

    def chain(self, ops: Collection[str], operand: Callable[[], Val], fold: Callable[[str, Val, Val], Val]) -> Val:
        """`operand (op operand)*` for the binary operators `ops` of one precedence level, folded left to right."""
        v = operand()
        while self.tok.kind == "op" and self.tok.text in ops:
            op = self.take().text
            v = fold(op, v, operand())
        return v

    # precedence, lowest first: | & ~ comparisons + - * / // % unary ** atoms
    def expr(self) -> Val:
        return self.chain(("|",), self.and_, symbolic)

    def and_(self) -> Val:
        return self.chain(("&",), self.not_, symbolic)

    def not_(self) -> Val:
        if self.tok.text == "~" and self.tok.kind == "op":
            self.take()
            self.enter()
            self.not_()
            self.depth -= 1
            return None
        return self.compare()

    def compare(self) -> Val:
        return self.chain(_COMPARE, self.sum_, symbolic)

    def sum_(self) -> Val:
        return self.chain(("+", "-"), self.product, lambda _op, a, b: fold_add(a, b))

    def product(self) -> Val:
        return self.chain(
            ("*", "/", "//", "%"), self.unary, lambda op, a, b: fold_mul(a, b) if op == "*" else fold_shrink(a, b)
        )

    def unary(self) -> Val:
        if self.tok.kind == "op" and self.tok.text in ("-", "+"):
            neg = self.take().text == "-"
            self.enter()
            v = self.unary()
            self.depth -= 1
            return -v if neg and v is not None else v
        return self.power()

    def power(self) -> Val:
        base = self.atom()
        if self.tok.kind == "op" and self.tok.text == "**":
            t = self.take()
            self.enter()
            exp = self.unary()  # right-associative, binds tighter than unary minus on its left
            self.depth -= 1
            return fold_pow(base, exp, t.pos)
        return base

    def atom(self) -> Val:
        t = self.tok
        if t.kind == "num":
            self.take()
            return _number(t)
        if t.kind == "op" and t.text == "(":
            self.take()
            self.enter()
            v = self.expr()
            self.depth -= 1
            self.expect(")")
            return v
        if t.kind == "name":
            self.take()
            if self.tok.kind == "op" and self.tok.text == "(":
                return self.call(t)
            return _bare_name(t)
        raise self.fail("expected a number, a symbol, a call or '('")

    def call(self, name: _Tok) -> Val:
        if name.text not in FUNCTIONS:
            raise ValueError(
                f"{name.text!r} at position {name.pos} is not a function torch's export writes "
                f"(allowed: {', '.join(sorted(FUNCTIONS))})"
            )
        self.expect("(")
        self.enter()
        if name.text in _LITERAL_FUNCTIONS:
            v = self.literal_call(name)
        else:
            v = self.function_args(name)
        self.depth -= 1
        self.expect(")")
        return v

    def function_args(self, name: _Tok) -> Val:
        values: list[Val] = []
        while not (self.tok.kind == "op" and self.tok.text == ")"):
            if self.keyword_arg():
                pass
            else:
                values.append(self.expr())
            if self.tok.kind == "op" and self.tok.text == ",":
                self.take()
            elif not (self.tok.kind == "op" and self.tok.text == ")"):
                raise self.fail("expected ',' or ')'")
        if name.text in ("Pow", "PowByNatural", "FloatPow") and len(values) == 2:
            return fold_pow(values[0], values[1], name.pos)
        if name.text == "LShift" and len(values) == 2:  # a * 2**b
            return fold_mul(values[0], fold_pow(2, values[1], name.pos))
        if name.text == "Mul" and values and all(v is not None for v in values):
            acc: Val = 1
            for v in values:
                acc = fold_mul(acc, v)
            return acc
        if name.text == "Add" and values and all(v is not None for v in values):
            acc = 0
            for v in values:
                acc = fold_add(acc, v)
            return acc
        return None

    def keyword_arg(self) -> bool:
        """Consume `name=value` (an assumption keyword) if one comes next."""
        if not (self.tok.kind == "name" and self.at(self.i + 1).text == "=" and self.at(self.i + 1).kind == "op"):
            return False
        key = self.take()
        if key.text not in KEYWORDS:
            raise ValueError(
                f"keyword {key.text!r} at position {key.pos} is not one torch's export writes "
                f"(allowed: {', '.join(sorted(KEYWORDS))})"
            )
        self.take()
        v = self.take()
        if not (v.kind == "name" and v.text in ("True", "False")) and v.kind != "num":
            raise ValueError(f"expected True, False or a number for {key.text}= at position {v.pos}, got {v.text!r}")
        if key.text == "precision" and not (
            v.kind == "num" and v.text.isdigit() and len(v.text) <= 5 and 1 <= int(v.text) <= MAX_FLOAT_PRECISION
        ):
            raise ValueError(
                f"precision={v.text} at position {v.pos}: expected a whole number of bits from 1 to "
                f"{MAX_FLOAT_PRECISION} (torch writes 53)"
            )
        return True

    def literal_call(self, name: _Tok) -> Val:
        """Symbol('s0', ...), Integer(5), Float('1.5', precision=53), Rational(1, 2): atoms of srepr."""
        if name.text == "Symbol":
            s = self.take()
            if s.kind != "str" or not _SYMBOL.match(s.text[1:-1]):
                raise ValueError(f"expected a quoted symbol name for Symbol at position {s.pos}, got {s.text!r}")
            self.rest_keywords()
            return None
        if name.text == "Float":
            s = self.tok
            if s.kind == "str":
                self.take()
                inner = s.text[1:-1]
                if not re.fullmatch(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan", inner):
                    raise ValueError(f"expected digits in Float at position {s.pos}, got {s.text!r}")
                value: Val = 1.0
            else:
                value = self.signed_number()
            self.rest_keywords()
            return None if value is None else float(value)
        first = self.signed_number()
        if name.text == "Rational":
            self.expect(",")
            self.signed_number()
            return 1.0  # a bounded fraction
        return first

    def signed_number(self) -> Val:
        neg = self.tok.kind == "op" and self.tok.text == "-"
        if neg:
            self.take()
        t = self.take()
        if t.kind != "num":
            raise ValueError(f"expected a number at position {t.pos}, got {t.text or 'the end'!r}")
        v = _number(t)
        return -v if neg and v is not None else v

    def rest_keywords(self) -> None:
        while self.tok.kind == "op" and self.tok.text == ",":
            self.take()
            if not self.keyword_arg():
                raise self.fail("expected an assumption keyword (name=True)")


def _number(t: _Tok) -> Val:
    if re.fullmatch(r"\d+", t.text):
        if len(t.text) > MAX_CONST_BITS // 3:
            raise ValueError(f"integer literal of {len(t.text)} digits at position {t.pos}")
        return int(t.text)
    return float(t.text)


def _bare_name(t: _Tok) -> Val:
    if t.text in CONSTANTS:
        return None
    if t.text in FUNCTIONS or t.text in _RESERVED or t.text.startswith("_") or not _SYMBOL.match(t.text):
        raise ValueError(f"{t.text!r} at position {t.pos} is not a symbol name torch's export writes")
    return None


_ACCEPTED_MAX = 4096  # expressions remembered as accepted: a program repeats few, and they are read several times
_ACCEPTED_MAX_CHARS = 256  # longer ones are parsed each time (bounds the memory: at most ~1 MB)
_accepted: dict[str, None] = {}


def check_expr(text: str) -> str:
    """`text` itself if it is an expression torch's export could have written; ValueError saying where if not."""
    if not isinstance(text, str):
        raise ValueError(f"expected a string, got {type(text).__name__}")
    if text in _accepted:
        return text
    _parse(text)
    if len(text) <= _ACCEPTED_MAX_CHARS:
        if len(_accepted) >= _ACCEPTED_MAX:
            _accepted.clear()
        _accepted[text] = None
    return text


def _parse(text: str) -> None:
    """Parse `text` whole; ValueError saying where it stops being an expression torch's export writes."""
    try:
        if len(text) > MAX_EXPR_CHARS:
            raise ValueError(f"an expression of {len(text)} characters (at most {MAX_EXPR_CHARS})")
        if not text.strip():
            raise ValueError("an empty symbolic expression")
        p = _Parser(text)
        p.expr()
        if p.tok.kind != "end":
            raise p.fail("expected the end of the expression")
    except RecursionError:  # the caller's stack was already deep: refuse rather than crash
        raise ValueError(
            f"not a symbolic expression torch's export writes: nesting too deep in {text[:80]!r}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"not a symbolic expression torch's export writes: {exc} in {text[:80]!r}") from None
