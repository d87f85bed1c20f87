"""Align two call sequences as a diff tool does: common prefix and suffix, anchors, then a minimal edit script.

Calls are keyed by (op, source line, module path). The common prefix and suffix are matched first; what lies
between is anchored by each key's repetitions: the k-th call of a key in A is paired with the k-th in B, and
the longest run of such pairs in order on both sides (patience diff's anchors, over repeated keys) is kept.
In a training loop every step repeats the same calls, so each step is paired with the same step of the other
run, never with a neighbour (what longest-block-first matching did). Between anchors, Myers' algorithm gives
a minimal edit script. Calls that still differ are aligned again by op alone, so a run whose lines moved (an
edited script) still lines up.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Sequence
from typing import Any

from opwire.schema.base import ThriftUnion

__all__ = ["MAX_EDIT_COST", "CallKey", "Opcode", "align", "align_calls", "call_key", "member", "opcodes"]

CallKey = tuple[str, str, str, tuple[str, ...]]
"""(op, source line, module path, the kind of value each argument passes)."""

Opcode = tuple[str, int, int, int, int]
"""(tag, i1, i2, j1, j2) as `difflib.SequenceMatcher.get_opcodes` gives: tag "equal", "delete", "insert", "replace"."""

MAX_EDIT_COST = 4_000_000
"""Largest (calls in the gap) x (edits) Myers' search may spend on one gap between anchors; beyond it, the gap's
calls are listed as only in A and only in B rather than searched (a gap that large is not one change)."""


def align(a: Sequence[Hashable], b: Sequence[Hashable], *coarser: tuple[Sequence[Hashable], Sequence[Hashable]]
          ) -> list[tuple[int, int]]:  # fmt: skip
    """Pairs (i, j) of matched positions, increasing on both sides; `coarser` keys re-align what stays unmatched."""
    pairs: list[tuple[int, int]] = []
    stack = [(0, len(a), 0, len(b))]
    while stack:
        lo_a, hi_a, lo_b, hi_b = stack.pop()
        while lo_a < hi_a and lo_b < hi_b and a[lo_a] == b[lo_b]:
            pairs.append((lo_a, lo_b))
            lo_a, lo_b = lo_a + 1, lo_b + 1
        while lo_a < hi_a and lo_b < hi_b and a[hi_a - 1] == b[hi_b - 1]:
            hi_a, hi_b = hi_a - 1, hi_b - 1
            pairs.append((hi_a, hi_b))
        if lo_a == hi_a or lo_b == hi_b:
            continue
        anchors = _anchors(a, b, lo_a, hi_a, lo_b, hi_b)
        if not anchors:
            pairs += _myers(a, b, lo_a, hi_a, lo_b, hi_b)
            continue
        prev_a, prev_b = lo_a, lo_b
        for i, j in anchors:
            pairs.append((i, j))
            stack.append((prev_a, i, prev_b, j))
            prev_a, prev_b = i + 1, j + 1
        stack.append((prev_a, hi_a, prev_b, hi_b))
    pairs.sort()
    if coarser:
        pairs = _refine(pairs, len(a), len(b), coarser)
    return pairs


def align_calls(a: Sequence[CallKey], b: Sequence[CallKey]) -> list[tuple[int, int]]:
    """`align` of two runs' calls by their keys, then by (op, source line, module path), then by op alone."""
    return align(a, b, ([k[:3] for k in a], [k[:3] for k in b]), ([k[0] for k in a], [k[0] for k in b]))


def call_key(rec: Any) -> CallKey:
    """Where a call was made (its op, source line and module path) and which kind of value each argument passes
    (tensor, float, ...): two calls of one op on one line that pass different kinds are different calls (a
    backward's `mul` by a tensor and by a number). `rec` is a `CallRecord` or its `thrift.decode_plain` value."""
    metadata = rec.metadata or {}
    kinds = tuple(member(na.arg) for na in rec.inputs or ())
    return rec.target, metadata.get("source", ""), metadata.get("module", ""), kinds


def member(arg: Any) -> str:
    """The member a union holds: a model's `type`, or the one field of its `thrift.decode_plain` value."""
    return arg.type if isinstance(arg, ThriftUnion) else str(next(iter(arg.__dict__)))


def opcodes(pairs: list[tuple[int, int]], n: int, m: int) -> list[Opcode]:
    """The matched pairs as difflib-style opcodes covering both sequences."""
    out: list[Opcode] = []
    i = j = 0
    for x, y in [*pairs, (n, m)]:
        if x > i or y > j:
            tag = "replace" if x > i and y > j else ("delete" if x > i else "insert")
            out.append((tag, i, x, j, y))
        if x < n and y < m:
            if out and out[-1][0] == "equal" and out[-1][2] == x and out[-1][4] == y:
                _, i1, _, j1, _ = out.pop()
                out.append(("equal", i1, x + 1, j1, y + 1))
            else:
                out.append(("equal", x, x + 1, y, y + 1))
        i, j = x + 1, y + 1
    return out


def _refine(
    pairs: list[tuple[int, int]], n: int, m: int, coarser: tuple[tuple[Sequence[Hashable], Sequence[Hashable]], ...]
) -> list[tuple[int, int]]:
    """Align each unmatched gap again by the next coarser keys."""
    ka, kb = coarser[0]
    out: list[tuple[int, int]] = []
    i = j = 0
    for x, y in [*pairs, (n, m)]:
        if x > i and y > j:
            sub = align(ka[i:x], kb[j:y], *((ca[i:x], cb[j:y]) for ca, cb in coarser[1:]))
            out += [(i + p, j + q) for p, q in sub]
        if x < n and y < m:
            out.append((x, y))
        i, j = x + 1, y + 1
    return out


def _anchors(
    a: Sequence[Hashable], b: Sequence[Hashable], lo_a: int, hi_a: int, lo_b: int, hi_b: int
) -> list[tuple[int, int]]:
    """The longest in-order run of (k-th call of a key in A, k-th call of it in B) pairs, over a[lo:hi], b[lo:hi]."""
    where: dict[tuple[Hashable, int], int] = {}
    seen: dict[Hashable, int] = {}
    for j in range(lo_b, hi_b):
        k = seen.get(b[j], 0)
        seen[b[j]] = k + 1
        where[(b[j], k)] = j
    seen.clear()
    candidates: list[tuple[int, int]] = []
    for i in range(lo_a, hi_a):
        k = seen.get(a[i], 0)
        seen[a[i]] = k + 1
        at = where.get((a[i], k))
        if at is not None:
            candidates.append((i, at))
    return _increasing(candidates)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` (increasing in i) whose j increase too (patience sorting)."""
    tails: list[int] = []  # tails[k]: smallest j ending an increasing run of length k + 1
    tail_at: list[int] = []  # index into pairs of that run's last pair
    back: list[int] = []
    for idx, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(idx)
        else:
            tails[k], tail_at[k] = j, idx
        back.append(tail_at[k - 1] if k else -1)
    out: list[tuple[int, int]] = []
    idx = tail_at[-1] if tail_at else -1
    while idx >= 0:
        out.append(pairs[idx])
        idx = back[idx]
    out.reverse()
    return out


def _myers(
    a: Sequence[Hashable], b: Sequence[Hashable], lo_a: int, hi_a: int, lo_b: int, hi_b: int
) -> list[tuple[int, int]]:
    """Matched pairs of a minimal edit script of a[lo_a:hi_a] into b[lo_b:hi_b] (none when it would cost too much)."""
    n, m = hi_a - lo_a, hi_b - lo_b
    limit = min(n + m, MAX_EDIT_COST // max(n + m, 1))
    v = {1: 0}
    trail: list[dict[int, int]] = []
    for d in range(limit + 1):
        trail.append(dict(v))
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[lo_a + x] == b[lo_b + y]:
                x, y = x + 1, y + 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trail, d, n, m, lo_a, lo_b)
    return []


def _backtrack(trail: list[dict[int, int]], d: int, n: int, m: int, lo_a: int, lo_b: int) -> list[tuple[int, int]]:
    """Walk the edit path back from (n, m): the diagonal runs between edits are the matched pairs."""
    pairs: list[tuple[int, int]] = []
    x, y = n, m
    for step in range(d, -1, -1):
        v = trail[step]  # the furthest x per diagonal before edit `step` was taken
        k = x - y
        if step == 0:
            prev_x = prev_y = start_x = 0
        else:
            down = k == -step or (k != step and v[k - 1] < v[k + 1])
            prev_k = k + 1 if down else k - 1
            prev_x = v[prev_k]
            prev_y = prev_x - prev_k
            start_x = prev_x if down else prev_x + 1
        start_y = start_x - k
        while x > start_x and y > start_y:
            x, y = x - 1, y - 1
            pairs.append((lo_a + x, lo_b + y))
        x, y = prev_x, prev_y
    pairs.reverse()
    return pairs
