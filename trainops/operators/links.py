"""The extra link of the training operator: the job's page in the SageMaker console.

Airflow 3 computes extra links in the worker when a try ends (deferred included) and stores the text in XCom; the UI
shows that text later. The operator keeps the job's name and region on itself as soon as it knows them
(`remember_console_job`), so the link exists while the task is deferred, after it failed, and after it succeeded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

#: Attribute of an operator holding ``{"job_name": ..., "region": ...}`` once the job is known.
CONSOLE_ATTRIBUTE = "_trainops_console_job"


def console_domain(region: str) -> str:
    """The console's domain for a region's partition (China and GovCloud have their own)."""
    if region.startswith("cn-"):
        return "console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return "console.amazonaws-us-gov.com"
    return "console.aws.amazon.com"


def training_job_console_url(job_name: str, region: str) -> str:
    """The SageMaker console page of a training job."""
    return (f"https://{console_domain(region)}/sagemaker/home?region={quote(region)}"
            f"#/jobs/{quote(job_name)}")


def remember_console_job(operator: Any, job_name: str, region: str | None) -> None:
    """Record the job behind the link (nothing without a region: there would be no console page to point at)."""
    if region:
        setattr(operator, CONSOLE_ATTRIBUTE, {"job_name": job_name, "region": region})


class SageMakerTrainingJobLink(BaseOperatorLink):
    """"SageMaker training job": the console page of the job the task created or re-attached to."""

    name = "SageMaker training job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        job = getattr(operator, CONSOLE_ATTRIBUTE, None)
        if not job:
            return ""  # local backend, or the task ended before a job existed
        return training_job_console_url(job["job_name"], job["region"])
