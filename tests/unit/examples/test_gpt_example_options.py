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
