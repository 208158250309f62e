"""Job names: the SageMaker pattern, deterministic names for retries, timestamped names."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from trainops.spec.names import (
    deterministic_job_name,
    sanitize_base,
    timestamped_job_name,
    valid_job_name,
    with_suffix,
)


def test_valid_names():
    assert valid_job_name("a")
    assert valid_job_name("digits-train-2")
    assert valid_job_name("a--b")  # the pattern allows runs of hyphens between characters
    assert valid_job_name("x" * 63)


def test_invalid_names():
    for name in ["", "-a", "a-", "a_b", "a.b", "x" * 64, "é", None, 42]:
        assert not valid_job_name(name), name


def test_deterministic_names_repeat_and_differ_by_parts():
    first = deterministic_job_name("retrain_pipeline.train", "run-2026-01-01", "train")
    assert first == deterministic_job_name("retrain_pipeline.train", "run-2026-01-01", "train")
    assert first != deterministic_job_name("retrain_pipeline.train", "run-2026-01-02", "train")
    assert first.startswith("retrain-pipeline-train-")
    assert valid_job_name(first)


def test_part_boundaries_matter():
    assert deterministic_job_name("job", "a-b", "c") != deterministic_job_name("job", "a", "b-c")


def test_long_bases_are_cut_and_keep_the_hash():
    name = deterministic_job_name("x" * 200, "run")
    assert len(name) == 63
    assert name == deterministic_job_name("x" * 200, "run")
    assert name.rsplit("-", 1)[1] == deterministic_job_name("x" * 200, "run").rsplit("-", 1)[1]
    # Two long bases that share their first 52 characters still get different names.
    assert deterministic_job_name("y" * 100 + "a", "run") != deterministic_job_name("y" * 100 + "b", "run")


def test_sanitize_base():
    assert sanitize_base("My Model/v2 (final)") == "My-Model-v2-final"
    assert sanitize_base("___") == "job"
    assert sanitize_base("--a--b--") == "a-b"


def test_with_suffix_never_ends_the_base_with_a_hyphen():
    name = with_suffix("a" * 60 + "-" + "b" * 10, "2")
    assert valid_job_name(name) and len(name) <= 63


def test_timestamped_names():
    moment = datetime(2026, 3, 4, 5, 6, 7, 891000, tzinfo=timezone.utc)
    assert timestamped_job_name("digits", moment) == "digits-2026-03-04-05-06-07-891"
    assert len(timestamped_job_name("z" * 80, moment)) == 63


@settings(max_examples=200, deadline=None)
@given(base=st.text(max_size=120), parts=st.lists(st.text(max_size=30), max_size=4))
def test_every_deterministic_name_is_valid(base, parts):
    name = deterministic_job_name(base, *parts)
    assert valid_job_name(name), name
