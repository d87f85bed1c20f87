"""Hypothesis's on-disk caches, filled once per run by the main pytest process instead of once per xdist worker.

A fresh clone has no `.hypothesis/`: every worker's first text strategy then builds the table of the characters
UTF-8 encodes (a loop over all 1.1M code points, ~1.5 CPU-s) and its first draws parse every local module for its
constants (~0.6 CPU-s), each writing the result to `.hypothesis/` only after the other workers, started at the same
time, have begun the same work. Filling those files before the workers need them gives every worker the same
tables (read from the files, as on any later run), so nothing drawn changes; only the repeated work goes.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import threading
import types
from pathlib import Path

from hypothesis.internal import charmap
from hypothesis.internal.constants_ast import constants_from_module

# What `charmap.intervals_from_codec("utf-8")` finds: every code point but the surrogates encodes, and each decodes
# back to itself (checked by `utf8_intervals` before it is written)
Intervals = tuple[tuple[int, int], ...]
_SURROGATES = (0xD800, 0xDFFF)
UTF8_ENCODABLE: Intervals = ((0, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, sys.maxunicode))


def utf8_intervals() -> tuple[Intervals, Intervals]:
    """The (encodable, encodable but not round-tripping) code point intervals of UTF-8, checked against the codec.

    One encode and decode of every encodable code point in a row proves each encodes and decodes to itself (an
    error raises; UTF-8 decodes a concatenation as the concatenation of its parts), and each surrogate alone must
    fail to encode: the per-character loop of Hypothesis's `intervals_from_codec` gives the same two sets.
    """
    text = "".join(chr(i) for a, b in UTF8_ENCODABLE for i in range(a, b + 1))
    if text.encode("utf-8").decode("utf-8") != text:
        raise AssertionError("UTF-8 does not round-trip every non-surrogate code point")
    for i in range(_SURROGATES[0], _SURROGATES[1] + 1):
        try:
            chr(i).encode("utf-8")
        except UnicodeEncodeError:
            continue
        raise AssertionError(f"UTF-8 encodes the surrogate {i:#x}")
    return UTF8_ENCODABLE, ()


def seed_utf8_codec_table() -> Path:
    """Write Hypothesis's cache file of the UTF-8 codec table (its own name and format), unless it exists."""
    path = charmap.charmap_file("codec-v2-utf-8")
    if path.exists():
        return path
    write_codec_table(path, *utf8_intervals())
    return path


def write_codec_table(path: Path, encodable: Intervals, non_roundtrip: Intervals) -> None:
    """One codec's table in Hypothesis's format, written as it writes it: atomically, reproducibly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    os.close(fd)
    with gzip.GzipFile(tmp, "wb", mtime=1) as fh:
        fh.write(json.dumps([encodable, non_roundtrip]).encode())
    os.replace(tmp, path)


def cache_constants(package: Path) -> int:
    """Have Hypothesis extract and cache the constants of every module file under `package` (keyed by the file's
    bytes, as it does for an imported module); returns the number of files."""
    files = sorted(package.rglob("*.py"))
    for path in files:
        module = types.ModuleType(path.stem)
        module.__file__ = str(path)
        constants_from_module(module)
    return len(files)


def fill(package: Path) -> None:
    """Every cache above: the UTF-8 table, the Unicode category table, the constants of `package`'s modules."""
    seed_utf8_codec_table()
    charmap.charmap()
    cache_constants(package)


_threads: list[threading.Thread] = []


def fill_in_background(package: Path) -> threading.Thread:
    """`fill` in a daemon thread: the main process of an xdist run idles while its workers import."""
    thread = threading.Thread(target=fill, args=(package,), name="hypothesis-cache", daemon=True)
    thread.start()
    _threads.append(thread)
    return thread


def wait() -> None:
    """Until every `fill_in_background` of this process is done (before a test moves Hypothesis's storage)."""
    for thread in _threads:
        thread.join()
