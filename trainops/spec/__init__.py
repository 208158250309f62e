"""The typed job spec: pure data and rules (pydantic), no I/O beyond reading a spec file, no AWS calls."""

from trainops.spec.distribution import Distribution, parse_distribution
from trainops.spec.job import JobSpec
from trainops.spec.loader import load_job_spec, parse_job_spec, read_document

__all__ = ["Distribution", "JobSpec", "load_job_spec", "parse_distribution", "parse_job_spec", "read_document"]
