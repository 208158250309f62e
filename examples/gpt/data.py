"""Text that ships with Python: byte-level tokens over the standard library's own source files (no download).

Files are read in sorted path order until ``max_bytes``, so a given Python version always gives the same corpus. A
``train`` channel, when the job has one, is read the same way instead (any files under it).

Batches are drawn from the step number and the seed alone, the whole global batch at once; each data-parallel rank
then takes its slice. So one process and N data-parallel ranks see exactly the same tokens at every step, which is
what the parity tests compare.
"""

from __future__ import annotations

import os
import sysconfig

import torch


def _files(root: str, suffixes: tuple[str, ...]) -> list[str]:
    found = []
    for directory, subdirectories, names in os.walk(root):
        subdirectories.sort()
        # site-packages is not the standard library: skip it (and test data, which holds odd encodings).
        subdirectories[:] = [name for name in subdirectories if name not in ("site-packages", "dist-packages")]
        found += [os.path.join(directory, name) for name in sorted(names) if name.endswith(suffixes)]
    return found


def load_corpus(channel_dir: str | None = None, max_bytes: int = 8 * 2**20) -> torch.Tensor:
    """The training text as a 1-D ``uint8`` tensor: the ``train`` channel's files when given, else the standard
    library's ``.py`` sources; at most ``max_bytes``."""
    if channel_dir and os.path.isdir(channel_dir):
        paths = _files(channel_dir, ("",))
    else:
        paths = _files(sysconfig.get_paths()["stdlib"], (".py",))
    chunks, total = [], 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                data = handle.read(max_bytes - total)
        except OSError:
            continue
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    if total < 4096:
        raise RuntimeError(f"the corpus is too small ({total} bytes) under {channel_dir or 'the standard library'}")
    return torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.uint8)


class Batches:
    """Deterministic batches: ``batch(step, dp_rank, dp_size)`` is this rank's slice of the step's global batch."""

    def __init__(self, tokens: torch.Tensor, seq_len: int, global_batch: int, seed: int):
        if len(tokens) <= seq_len + 1:
            raise ValueError("the corpus is shorter than one sequence")
        self.tokens = tokens
        self.seq_len = seq_len
        self.global_batch = global_batch
        self.seed = seed
        self.offsets = torch.arange(seq_len + 1)

    def batch(self, step: int, dp_rank: int = 0, dp_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        if self.global_batch % dp_size:
            raise ValueError(f"global batch {self.global_batch} is not divisible by {dp_size} data-parallel ranks")
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        starts = torch.randint(0, len(self.tokens) - self.seq_len - 1, (self.global_batch,), generator=generator)
        local = self.global_batch // dp_size
        rows = self.tokens[(starts[dp_rank * local:(dp_rank + 1) * local, None] + self.offsets)].long()
        return rows[:, :-1], rows[:, 1:]
