"""SymExpr strings for support.typed: `sym_exprs()` (Hypothesis's st.recursive + from_regex) and `SymExprs`, which
draws the same strings from the same choices without their nested strategy layers (tests/test_typed.py checks)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.utils import many
from hypothesis.strategies import SearchStrategy
from hypothesis.strategies._internal.lazy import unwrap_strategies

__all__ = ["SymExprs", "sym_exprs"]


def _leaf(strategy: st.SearchStrategy[Any]) -> Any:
    """The leaf strategy's own draw, without `data.draw`'s wrapping."""
    inner = unwrap_strategies(strategy)
    inner.validate()
    return inner.do_draw


_SYMBOLS = st.from_regex(r"[su][0-9]{1,3}", fullmatch=True)
_OPERATORS = ["+", "-", "*", "//", "%", "<", "<=", "=="]
_CALLS = ["Max", "Min", "FloorDiv", "CeilDiv", "Mod", "Add", "Mul"]
_SYM_MAX_LEAVES = 6


def sym_exprs() -> st.SearchStrategy[str]:
    """Expression strings of the forms torch's export writes: infix (`s0 + 1`) and srepr (`Add(Symbol('s0'), ...)`)."""
    atom = _SYMBOLS | st.integers(-(2**40), 2**40).map(str) | _SYMBOLS.map(lambda s: f"Symbol('{s}', integer=True)")

    def combine(parts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.tuples(parts, st.sampled_from(_OPERATORS), parts)
        call = st.tuples(st.sampled_from(_CALLS), parts, parts)
        return binary.map(lambda t: f"({t[0]} {t[1]} {t[2]})") | call.map(lambda t: f"{t[0]}({t[1]}, {t[2]})")

    return st.recursive(atom, combine, max_leaves=_SYM_MAX_LEAVES)


class _LeavesSpent(Exception):
    """More than `_SYM_MAX_LEAVES` atoms drawn: st.recursive draws the expression again."""


class SymExprs(SearchStrategy[str]):
    """`sym_exprs()` drawn as st.recursive draws it, choice for choice: a one_of of the atom and of `combine` applied
    to one_ofs of the shallower levels (Hypothesis flattens each nested one_of into its parent's branches), redrawn
    whole when it takes over 6 atoms."""

    def __init__(self) -> None:
        super().__init__()
        self._integer = _leaf(st.integers(-(2**40), 2**40))
        self._s_or_u = _leaf(st.characters(min_codepoint=ord("s"), max_codepoint=ord("u"), exclude_characters="t"))
        self._digit = _leaf(st.characters(min_codepoint=ord("0"), max_codepoint=ord("9")))
        self._leaves = 0

    def _symbol(self, data: ConjectureData) -> str:
        """`_SYMBOLS` as from_regex draws it: the letter, then 1 to 3 digits as st.lists (average 2) draws them."""
        letter = self._s_or_u(data)
        with many(data, min_size=1, max_size=3, average_size=2.0) as digits:
            return letter + "".join([self._digit(data) for _ in digits])

    def _atom(self, data: ConjectureData) -> str:
        if self._leaves <= 0:
            raise _LeavesSpent
        self._leaves -= 1
        kind = data.draw_integer(0, 2)
        if kind == 1:
            return str(self._integer(data))
        symbol = self._symbol(data)
        return symbol if kind == 0 else f"Symbol('{symbol}', integer=True)"

    def _combined(self, data: ConjectureData, level: int, call: bool) -> str:
        """`combine(parts)` where parts is the one_of of levels below `level` (level 1: the atom alone)."""
        if call:
            name = _CALLS[data.draw_integer(0, len(_CALLS) - 1)]
            a, b = self._part(data, level), self._part(data, level)
            return f"{name}({a}, {b})"
        a = self._part(data, level)
        op = _OPERATORS[data.draw_integer(0, len(_OPERATORS) - 1)]
        return f"({a} {op} {self._part(data, level)})"

    def _part(self, data: ConjectureData, level: int) -> str:
        return self._atom(data) if level == 1 else self._level_below(data, level)

    def _level_below(self, data: ConjectureData, level: int) -> str:
        """A draw from the one_of of the atom and the two branches of each level below `level`."""
        i = data.draw_integer(0, 2 * level - 2)
        return self._atom(data) if i == 0 else self._combined(data, (i + 1) // 2, call=i % 2 == 0)

    def do_draw(self, data: ConjectureData) -> str:
        while True:
            self._leaves = _SYM_MAX_LEAVES
            try:
                return self._level_below(data, 4)
            except _LeavesSpent:
                continue
