"""The GPT example's command line: what SageMaker (and the local backend, which renders the same request) passes an
SMP job's script must parse (issue 18: `--mp_parameters` stopped the FSDP2 benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "gpt"))

from loop import parser  # noqa: E402


def test_smp_parameters_from_the_job_are_accepted():
    args = parser("gpt").parse_args(["--size", "tiny", "--mp_parameters", "tensor_parallel_degree=2",
                                     "--global_batch", "8"])
    assert args.mp_parameters == "tensor_parallel_degree=2" and args.global_batch == 8


def test_an_unknown_option_is_still_refused():
    with pytest.raises(SystemExit):
        parser("gpt").parse_args(["--no-such-option", "1"])


def test_ddp_bucket_size_reaches_transform_in_a_two_rank_run(tmp_path):
    """`ddp_bucket_mb` (what bench/multi_gpu.py --ddp-bucket-mb passes) is the bucket size DDP gets; without it the
    example takes transform()'s choice (400 MB with both ranks on this host)."""
    import os
    import subprocess

    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(repo)}

    def transform_line(*extra: str) -> str:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "train.py",
                   "--size", "tiny", "--steps", "1", "--global_batch", "4", "--log_every", "0",
                   "--metrics_out", str(tmp_path / "training.json"), *extra]
        done = subprocess.run(command, cwd=repo / "examples" / "gpt", env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return next(line for line in (done.stdout + done.stderr).splitlines() if "DistributedDataParallel" in line)

    assert "bucket 7 MB" in transform_line("--ddp_bucket_mb", "7")
    assert "bucket 400 MB" in transform_line()
