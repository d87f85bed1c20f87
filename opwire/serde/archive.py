"""The one zip reader of every path (.pt2 archives, AOTInductor packages, detection): hostile zips are data.

CPython's `zipfile` parses the central directory well, but its entry reader is not safe on a file
opwire did not write: it inflates a whole bzip2/LZMA entry (and up to 2 GiB of deflate) before
noticing the declared size, and it raises `NotImplementedError`, `zlib.error`, `RuntimeError` for
method 99, corrupt streams and encryption. So `zipfile` lists the entries and this module reads them:
only STORED and DEFLATED entries, never encrypted ones, inflated in chunks that stop at the declared
size, and budgets charged against the archive as a whole (the bytes inflated, and their ratio to the
archive's size). A deflated entry's CRC-32 is checked while it inflates; a stored entry's only on demand
(`read(verify=True)`, `verify`), since a stored entry is usually mapped (`span`), not read. Everything
else is a `DecodeError` naming the archive and the entry.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from opwire.errors import DecodeError
from opwire.serde import budgets

__all__ = ["ZipArchive", "is_zip", "is_zip_head"]

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_MAGIC = b"PK\x03\x04"
_CHUNK = 1 << 20
_METHODS = {
    1: "shrunk",
    6: "imploded",
    9: "deflate64",
    12: "bzip2",
    14: "LZMA",
    93: "zstd",
    95: "xz",
    99: "AES-encrypted",
}


def is_zip_head(head: bytes) -> bool:
    """Whether a file's first bytes start a zip archive (a local file header, or an empty zip's end record)."""
    return head.startswith((_LOCAL_MAGIC, b"PK\x05\x06"))


def is_zip(path: str | Path) -> bool:
    """Whether `path` is a regular file holding a zip archive (devices, pipes and directories never are)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


class ZipArchive:
    """A zip archive whose entries are read within budgets; the central directory is parsed on open."""

    def __init__(
        self,
        path: str | Path,
        *,
        max_bytes: int = budgets.MAX_ARCHIVE_BYTES,
        max_ratio: int = budgets.MAX_COMPRESSION_RATIO,
    ) -> None:
        self.path = Path(path)
        self.src = str(self.path)
        self.max_bytes = max_bytes
        self.max_ratio = max_ratio
        self.read_bytes = 0  # read or inflated so far, against max_bytes
        self.inflated = 0  # inflated from deflated entries so far, against max_ratio x the archive's size
        if not is_zip(self.path):
            raise DecodeError(
                f"{self.src}: not a readable zip archive (no end-of-central-directory record in a regular file)"
            )
        try:
            with zipfile.ZipFile(self.path) as z:
                infos = z.infolist()
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            NotImplementedError,
            ValueError,
            EOFError,
            struct.error,
            OSError,
        ) as exc:
            raise DecodeError(f"{self.src}: not a readable zip archive ({exc})") from None
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            self.infos.setdefault(info.filename, info)  # the first of duplicate names, as zipfile's reader does
        self._file: BinaryIO = self.path.open("rb")
        self._size = os.fstat(self._file.fileno()).st_size

    def names(self) -> list[str]:
        """Entry names in directory order."""
        return list(self.infos)

    def __contains__(self, name: object) -> bool:
        return name in self.infos

    @property
    def size(self) -> int:
        """The archive file's size in bytes, taken at open."""
        return self._size

    def info(self, name: str) -> zipfile.ZipInfo:
        """The directory record of entry `name`; DecodeError when there is none."""
        info = self.infos.get(name)
        if info is None:
            raise DecodeError(f"{self.src}: missing entry `{name}`", name)
        return info

    def is_stored(self, name: str) -> bool:
        """Whether entry `name` is stored uncompressed (and so can be mapped rather than read)."""
        return self.info(name).compress_type == zipfile.ZIP_STORED

    def span(self, name: str) -> tuple[int, int]:
        """(offset, length) of a STORED entry's bytes in the file, checked against the directory and the file size.

        Nothing is read but the local header, and nothing is charged to the budgets: mapping costs no memory."""
        info = self.info(name)
        if info.flag_bits & 0x1 or info.compress_type != zipfile.ZIP_STORED:
            raise self._bad(info, "it is not a plain stored entry, so it cannot be mapped")
        if info.file_size != info.compress_size:
            raise self._bad(info, f"a stored entry claims {info.file_size} bytes from {info.compress_size} stored")
        return self._data_start(info), info.compress_size

    def read(self, name: str, *, verify: bool = True) -> bytes:
        """The bytes of entry `name`, checked (method, flags, sizes, ratio, budget) before and while inflating.

        A deflated entry's CRC-32 is always checked (while inflating); a stored entry's when `verify`."""
        info = self.info(name)
        self._check_entry(info)
        start = self._data_start(info)
        if info.compress_type == zipfile.ZIP_STORED:
            self._file.seek(start)
            data = self._file.read(info.compress_size)
            if len(data) != info.compress_size:
                raise self._bad(info, f"the file ends inside it ({len(data)} of {info.compress_size} stored bytes)")
            if verify:
                self._check_crc(info, zlib.crc32(data))
            return data
        return bytes(self._inflate(info, start))

    def inflate(self, name: str) -> bytearray:
        """A deflated entry's bytes in a fresh writable buffer (checked and charged as `read`)."""
        info = self.info(name)
        self._check_entry(info)
        if info.compress_type == zipfile.ZIP_STORED:
            raise self._bad(info, "it is stored, not deflated (map it with `span`)")
        return self._inflate(info, self._data_start(info))

    def verify(self, name: str) -> None:
        """Check entry `name`'s CRC-32, streaming its bytes in chunks (nothing is kept, nothing charged)."""
        info = self.info(name)
        if info.compress_type != zipfile.ZIP_STORED:
            self._check_entry(info, charge=False)
            self._inflate(info, self._data_start(info))
            return
        start, left = self.span(name)
        crc = 0
        self._file.seek(start)
        while left:
            buf = self._file.read(min(_CHUNK, left))
            if not buf:
                raise self._bad(info, "the file ends inside it")
            crc = zlib.crc32(buf, crc)
            left -= len(buf)
        self._check_crc(info, crc)

    def _check_crc(self, info: zipfile.ZipInfo, crc: int) -> None:
        if crc != info.CRC:
            raise self._bad(info, f"CRC-32 mismatch (stored {info.CRC:08x}, computed {crc:08x})")

    def _bad(self, info: zipfile.ZipInfo, why: str) -> DecodeError:
        return DecodeError(
            f"{self.src}: entry `{info.filename}`: {why}; the archive is corrupt or hostile", info.filename
        )

    def _check_entry(self, info: zipfile.ZipInfo, *, charge: bool = True) -> None:
        if info.flag_bits & 0x1:
            raise self._bad(info, "it is encrypted (opwire reads no encrypted entries)")
        method = info.compress_type
        if method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            name = _METHODS.get(method, "unknown")
            raise self._bad(
                info, f"compression method {method} ({name}); opwire reads STORED (0) and DEFLATED (8) entries only"
            )
        if method == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise self._bad(info, f"a stored entry claims {info.file_size} bytes from {info.compress_size} stored")
        if method == zipfile.ZIP_DEFLATED and info.file_size > self.max_ratio * max(info.compress_size, 1):
            raise budgets.exceeded(
                f"{self.src}: entry `{info.filename}` claims {info.file_size} bytes from {info.compress_size} stored "
                f"bytes, a ratio of",
                info.file_size // max(info.compress_size, 1),
                "max_ratio",
                self.max_ratio,
                info.filename,
            )
        if not charge:
            return
        if method == zipfile.ZIP_DEFLATED and self.inflated + info.file_size > self.max_ratio * max(self._size, 1):
            raise budgets.exceeded(
                f"{self.src}: inflating entry `{info.filename}` brings the bytes inflated from this archive of "
                f"{self._size} bytes to {self.inflated + info.file_size}, a ratio of",
                (self.inflated + info.file_size) // max(self._size, 1),
                "max_ratio",
                self.max_ratio,
                info.filename,
            )
        if self.read_bytes + info.file_size > self.max_bytes:
            raise budgets.exceeded(
                f"{self.src}: reading entry `{info.filename}` brings the bytes read from the archive to",
                self.read_bytes + info.file_size,
                "max_bytes",
                self.max_bytes,
                info.filename,
            )
        if info.header_offset + info.compress_size > self._size:
            raise self._bad(info, f"it claims {info.compress_size} stored bytes past the end of the file")
        self.read_bytes += info.file_size
        if method == zipfile.ZIP_DEFLATED:
            self.inflated += info.file_size

    def _data_start(self, info: zipfile.ZipInfo) -> int:
        """Offset of the entry's stored bytes, from its local header (which must match the directory)."""
        self._file.seek(info.header_offset)
        raw = self._file.read(_LOCAL_HEADER.size)
        if len(raw) != _LOCAL_HEADER.size:
            raise self._bad(info, "its local header lies past the end of the file")
        magic, _ver, flags, method, _t, _d, _crc, _cs, _us, name_len, extra_len = _LOCAL_HEADER.unpack(raw)
        if magic != _LOCAL_MAGIC:
            raise self._bad(info, "no local file header where the directory points")
        if method != info.compress_type or (flags & 0x1) != (info.flag_bits & 0x1):
            raise self._bad(info, "the local header disagrees with the directory (method or encryption flag)")
        start: int = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
        if start + info.compress_size > self._size:
            raise self._bad(info, "its stored bytes run past the end of the file")
        return start

    def _inflate(self, info: zipfile.ZipInfo, start: int) -> bytearray:
        """Raw-deflate `compress_size` bytes in chunks, never producing more than the declared size."""
        inflater = zlib.decompressobj(-15)
        out = bytearray()
        remaining = info.file_size
        left = info.compress_size
        self._file.seek(start)
        try:
            while left and not inflater.eof:
                buf = self._file.read(min(_CHUNK, left))
                if not buf:
                    raise self._bad(info, "the file ends inside it")
                left -= len(buf)
                while buf and not inflater.eof:
                    piece = inflater.decompress(buf, remaining + 1)
                    if len(piece) > remaining:
                        raise self._bad(info, f"it inflates past its declared size of {info.file_size} bytes")
                    out += piece
                    remaining -= len(piece)
                    buf = inflater.unconsumed_tail
            if not inflater.eof:
                raise self._bad(info, "the deflate stream is truncated")
        except zlib.error as exc:
            raise self._bad(info, f"corrupt deflate data ({exc})") from None
        if remaining:
            raise self._bad(info, f"it inflates to {len(out)} bytes, not the declared {info.file_size}")
        self._check_crc(info, zlib.crc32(out))
        return out

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> ZipArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
