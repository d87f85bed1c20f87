"""Constant folding for the symbolic-expression parser (`symexpr.py`), with a bound on every constant's size.

`sympy.sympify` folds constant subexpressions itself, and `2**10**10` would keep it busy for hours; the parser
folds them first with these rules, so a constant larger than `MAX_CONST_BITS` is refused before sympy meets
it. A value is `None` when it depends on a symbol (nothing to fold), else an int, or a float standing for any
bounded non-integer (its exact value never matters here, only that it stays small).
"""

from __future__ import annotations

__all__ = ["MAX_CONST_BITS", "Val", "fold_add", "fold_mul", "fold_pow", "fold_shrink", "symbolic"]

MAX_CONST_BITS = 1024
"""Largest constant (in bits) a constant subexpression may fold to; a SymInt is 64 bits."""

Val = int | float | None
"""A parsed value: None when symbolic, else an int or float constant (folded with a size bound)."""


def symbolic(_op: str, _a: Val, _b: Val) -> Val:
    """Comparisons and logic: a truth value, never a large constant."""
    return None


def _bits(v: Val) -> int:
    if v is None:
        return 0
    if isinstance(v, float):
        return 64
    return abs(v).bit_length()


def _bounded(v: int, pos: int | None = None) -> int:
    if v.bit_length() > MAX_CONST_BITS:
        raise ValueError(f"a constant of more than {MAX_CONST_BITS} bits" + (f" at position {pos}" if pos else ""))
    return v


def fold_add(a: Val, b: Val) -> Val:
    """`a + b` (and `a - b`): a constant only within MAX_CONST_BITS."""
    if a is None or b is None:
        return None
    if isinstance(a, float) or isinstance(b, float):
        return 1.0
    return _bounded(a + b)


def fold_mul(a: Val, b: Val) -> Val:
    """`a * b`: a constant only within MAX_CONST_BITS (refused before the product is computed)."""
    if a is None or b is None:
        return None
    if isinstance(a, float) or isinstance(b, float):
        return 1.0
    if _bits(a) + _bits(b) > MAX_CONST_BITS + 1:
        raise ValueError(f"a constant product of more than {MAX_CONST_BITS} bits")
    return _bounded(a * b)


def fold_shrink(a: Val, b: Val) -> Val:
    """Division and modulo: the result is no larger than the left operand."""
    if a is None or b is None:
        return None
    return a if isinstance(a, int) else 1.0


def fold_pow(base: Val, exp: Val, pos: int) -> Val:
    """`base ** exp`: symbolic when either side is; a constant only within MAX_CONST_BITS."""
    if exp is None:
        return None
    if isinstance(exp, float):
        if abs(exp) > MAX_CONST_BITS:
            raise ValueError(f"an exponent of {exp} at position {pos} (at most {MAX_CONST_BITS})")
        return None if base is None else 1.0
    if abs(exp) > MAX_CONST_BITS:
        raise ValueError(f"an exponent of {exp} at position {pos} (at most {MAX_CONST_BITS})")
    if base is None or isinstance(base, float):
        return None if base is None else 1.0
    if exp < 0:
        return 1.0
    if _bits(base) * exp > MAX_CONST_BITS + 1:
        raise ValueError(f"a power of more than {MAX_CONST_BITS} bits at position {pos}")
    return _bounded(base**exp, pos)
