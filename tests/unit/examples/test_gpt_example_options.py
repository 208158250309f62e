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


class _Stop(Exception):
    pass


@pytest.mark.parametrize("given, expected", [(["--ddp_bucket_mb", "7"], {"bucket_cap_mb": 7}), ([], None)])
def test_ddp_bucket_size_reaches_transform(monkeypatch, given, expected):
    """`ddp_bucket_mb` (what bench/multi_gpu.py --ddp-bucket-mb passes) becomes transform()'s ddp_options; without
    it the example leaves the choice to transform() (DDP_DEFAULTS, tested in tests/unit/runtime/test_parallel.py)."""
    import trainops.runtime

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    seen = {}

    def recording_transform(model, **options):
        seen.update(options)
        raise _Stop

    monkeypatch.setattr(trainops.runtime, "transform", recording_transform)
    monkeypatch.setattr(sys, "argv", ["train.py", "--size", "tiny", "--steps", "1", *given])
    import train

    try:
        with pytest.raises(_Stop):
            train.main()
    finally:
        trainops.runtime.cleanup()
    assert seen["ddp_options"] == expected
