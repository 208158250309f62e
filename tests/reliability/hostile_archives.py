"""Model archives that lie in their headers, built byte by byte (Python's tarfile cannot write most of them): a GNU
sparse member, a negative size, a modification time no clock has, a corrupt header after good members, a gzip
stream cut short, a bomb. Shared by `test_reliability_hostile_files.py` and the bench's rows."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

BLOCK = 512


def _octal(value: int, width: int) -> bytes:
    return f"{value:0{width - 1}o}".encode("ascii") + b"\0"


def header(name: str, size: int, *, kind: bytes = b"0", mtime_field: bytes | None = None,
           size_field: bytes | None = None, extra: dict[int, bytes] | None = None) -> bytes:
    """One ustar header block with its checksum; ``size_field`` / ``mtime_field`` replace the encoded fields (12
    bytes each) as a forger would write them; ``extra`` puts raw bytes at offsets (GNU sparse data)."""
    block = bytearray(BLOCK)
    block[0:len(name)] = name.encode("utf-8")
    block[100:108] = _octal(0o644, 8)
    block[108:116] = _octal(0, 8)
    block[116:124] = _octal(0, 8)
    block[124:136] = size_field if size_field is not None else _octal(size, 12)
    block[136:148] = mtime_field if mtime_field is not None else _octal(1_700_000_000, 12)
    block[156:157] = kind
    block[257:263] = b"ustar\0"
    block[263:265] = b"00"
    for offset, raw in (extra or {}).items():
        block[offset:offset + len(raw)] = raw
    block[148:156] = b" " * 8
    checksum = sum(block)
    block[148:156] = f"{checksum:06o}".encode("ascii") + b"\0 "
    return bytes(block)


def member(name: str, data: bytes, **fields) -> bytes:
    padding = (-len(data)) % BLOCK
    return header(name, len(data), **fields) + data + b"\0" * padding


def end() -> bytes:
    return b"\0" * (BLOCK * 2)


def gzipped(raw: bytes) -> bytes:
    return gzip.compress(raw)


def base256(value: int, width: int = 12) -> bytes:
    """A numeric field in GNU's base-256 form (first byte 0x80 for positive, 0xff for negative)."""
    if value >= 0:
        return bytes([0x80]) + value.to_bytes(width - 1, "big")
    return bytes([0xff]) + (256 ** (width - 1) + value).to_bytes(width - 1, "big")


def sparse_member(name: str, real_size: int) -> bytes:
    """A GNU sparse member ('S') that stores no data but declares ``real_size`` bytes: its extraction by tarfile
    writes a file of that size (one map entry: 0 bytes at offset ``real_size``)."""
    extra = {386: _octal(real_size, 12) + _octal(0, 12), 482: b"\0", 483: _octal(real_size, 12)}
    return header(name, 0, kind=b"S", extra=extra)


def archives(scratch: Path) -> dict[str, tuple[Path, str]]:
    """name -> (archive, the member the refusal must name)."""
    good = member("weights.bin", b"w" * 1000)
    made = {
        "sparse": (gzipped(good + sparse_member("holes.bin", 1 << 30) + end()), "holes.bin"),
        "negative-size": (gzipped(member("first.bin", b"a" * 600) + header("liar.bin", 0, size_field=base256(-1536))
                                  + member("after.bin", b"b" * 600) + end()), "liar.bin"),
        "huge-mtime": (gzipped(member("clock.bin", b"c", mtime_field=base256(10 ** 20)) + end()), "clock.bin"),
        "negative-mtime": (gzipped(member("early.bin", b"c", mtime_field=base256(-(10 ** 18))) + end()),
                           "early.bin"),
        "corrupt-second-header": (gzipped(good + _corrupt(member("second.bin", b"s" * 10))
                                          + member("third.bin", b"t" * 10) + end()), "weights.bin"),
    }
    whole = gzipped(good + member("tail.bin", b"x" * 200_000) + end())
    made["truncated-gzip"] = (whole[:len(whole) // 2], "tail.bin")
    paths = {}
    for name, (data, named) in made.items():
        path = scratch / f"{name}.tar.gz"
        path.write_bytes(data)
        paths[name] = (path, named)
    pax = scratch / "nan-mtime.tar.gz"
    with tarfile.open(pax, "w:gz", format=tarfile.PAX_FORMAT) as bundle:
        info = tarfile.TarInfo("nan.bin")
        info.size = 1
        info.pax_headers = {"mtime": "nan"}
        bundle.addfile(info, io.BytesIO(b"n"))
    paths["nan-mtime"] = (pax, "nan.bin")
    return paths


def _corrupt(block_and_data: bytes) -> bytes:
    """The member with its header's checksum broken (tarfile then stops reading there without a word)."""
    broken = bytearray(block_and_data)
    broken[148:154] = b"777777"
    return bytes(broken)


def bomb(path: Path, megabytes: int, *, cut_short: bool = False) -> Path:
    """A gzip of one member of ``megabytes`` MiB of zeros (about 1,000 times smaller than what it expands to). With
    ``cut_short`` the stream ends a few KB after the member's header: a reader that went on into the data would find
    it truncated, so a refusal as a bomb proves the header alone decided."""
    with gzip.open(path, "wb", compresslevel=9) as stream:
        stream.write(header("zeros.bin", megabytes << 20))
        chunk = b"\0" * (1 << 20)
        for _ in range(megabytes):
            stream.write(chunk)
        stream.write(end())
    if cut_short:
        path.write_bytes(path.read_bytes()[:4096])
    return path
