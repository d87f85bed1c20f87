"""tests/support/hypothesis_cache.py: the caches it fills are the ones Hypothesis reads, with what Hypothesis would
compute (so a run with them draws what a run without them draws)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import configuration
from hypothesis.internal import charmap
from hypothesis.internal.constants_ast import _constants_from_source
from support import hypothesis_cache


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """Hypothesis's storage directory moved to an empty temp directory for one test."""
    hypothesis_cache.wait()  # this process's own filling, if any, done in the real directory
    configuration.set_hypothesis_home_dir(tmp_path)
    try:
        yield tmp_path
    finally:
        configuration.set_hypothesis_home_dir(None)


def test_the_utf8_table_is_the_codecs() -> None:
    encodable, non_roundtrip = hypothesis_cache.utf8_intervals()
    assert encodable == ((0, 0xD7FF), (0xE000, 0x10FFFF)) and non_roundtrip == ()
    for i in (0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF):
        assert chr(i).encode("utf-8").decode("utf-8") == chr(i)
    for i in (0xD800, 0xDB7F, 0xDC00, 0xDFFF):
        with pytest.raises(UnicodeEncodeError):
            chr(i).encode("utf-8")


def test_hypothesis_reads_the_seeded_codec_table(home: Path) -> None:
    path = hypothesis_cache.seed_utf8_codec_table()
    assert path.is_relative_to(home) and path == charmap.charmap_file("codec-v2-utf-8")
    encodable, non_roundtrip = charmap.intervals_from_codec.__wrapped__("utf-8")  # uncached: reads the file
    assert (encodable.intervals, non_roundtrip.intervals) == hypothesis_cache.utf8_intervals()
    # a table it could not have computed comes back as written: it read the file, in the format written
    hypothesis_cache.write_codec_table(path, ((65, 90),), ((66, 66),))
    encodable, non_roundtrip = charmap.intervals_from_codec.__wrapped__("utf-8")
    assert (encodable.intervals, non_roundtrip.intervals) == (((65, 90),), ((66, 66),))
    assert hypothesis_cache.seed_utf8_codec_table() == path  # an existing table is left as it is
    assert charmap.intervals_from_codec.__wrapped__("utf-8")[0].intervals == ((65, 90),)


def test_cached_constants_are_hypothesis_own(home: Path, tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    sources = {
        "a.py": ("X = 12345\nNAME = 'alpha-beta'\n", {12345, "alpha-beta"}),
        "sub/b.py": ("Y = (2.5, b'raw')\n", {2.5, b"raw"}),
    }
    for name, (text, _) in sources.items():
        (package / name).write_text(text)
    assert hypothesis_cache.cache_constants(package) == 2
    for text, constants in sources.values():
        cached = home / "constants" / hashlib.sha1(text.encode()).hexdigest()[:16]  # its key: the source's bytes
        got = set(_constants_from_source(cached.read_bytes(), limit=True))
        assert got == set(_constants_from_source(text, limit=True)) and constants <= got
