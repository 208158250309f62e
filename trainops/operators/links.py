"""The extra links of the operators: the job's page in the SageMaker console, its CloudWatch logs, the evaluation's
processing job and the registered model package.

Airflow computes extra links in the worker when a try ends (deferred included) and stores the text in XCom; the UI
shows that text later. An operator keeps what each link points at on itself as soon as it knows it
(`remember_link`), so the link exists while the task is deferred, after it failed, and after it succeeded. A local
job has no console page: its links are empty.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from trainops.operators.compat import BaseOperatorLink

#: Attribute of an operator holding ``{kind: {"name": ..., "region": ...}}`` once the job is known.
LINKS_ATTRIBUTE = "_trainops_links"


def console_domain(region: str) -> str:
    """The console's domain for a region's partition (China and GovCloud have their own)."""
    if region.startswith("cn-"):
        return "console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return "console.amazonaws-us-gov.com"
    return "console.aws.amazon.com"


def training_job_console_url(job_name: str, region: str) -> str:
    """The SageMaker console page of a training job."""
    return f"https://{console_domain(region)}/sagemaker/home?region={quote(region)}#/jobs/{quote(job_name)}"


def training_logs_url(job_name: str, region: str) -> str:
    """The job's log streams (one per host) in CloudWatch Logs, filtered to this job."""
    group = quote(quote("/aws/sagemaker/TrainingJobs", safe=""), safe="").replace("%", "$")
    filter_ = quote(quote(f"?logStreamNameFilter={job_name}/", safe=""), safe="").replace("%", "$")
    return (f"https://{console_domain(region)}/cloudwatch/home?region={quote(region)}"
            f"#logsV2:log-groups/log-group/{group}/log-events{filter_}")


def processing_job_console_url(job_name: str, region: str) -> str:
    """The SageMaker console page of a processing job (the evaluation)."""
    return f"https://{console_domain(region)}/sagemaker/home?region={quote(region)}#/processing-jobs/{quote(job_name)}"


def model_package_console_url(arn: str, region: str) -> str:
    """The SageMaker console page of a model package (a registered version), by its ARN."""
    return (f"https://{console_domain(region)}/sagemaker/home?region={quote(region)}"
            f"#/model-packages/{quote(arn, safe='')}")


URLS = {"training_job": training_job_console_url, "training_logs": training_logs_url,
        "processing_job": processing_job_console_url, "model_package": model_package_console_url}


def remember_link(operator: Any, kind: str, name: str | None, region: str | None) -> None:
    """Record what the ``kind`` link points at (nothing without a name and a region: no console page)."""
    if name and region:
        links = dict(getattr(operator, LINKS_ATTRIBUTE, None) or {})
        links[kind] = {"name": name, "region": region}
        setattr(operator, LINKS_ATTRIBUTE, links)


def remember_console_job(operator: Any, job_name: str, region: str | None) -> None:
    """The training job's page and its logs."""
    remember_link(operator, "training_job", job_name, region)
    remember_link(operator, "training_logs", job_name, region)


class _ConsoleLink(BaseOperatorLink):
    kind = ""

    def get_link(self, operator: Any, *, ti_key: Any = None) -> str:
        target = (getattr(operator, LINKS_ATTRIBUTE, None) or {}).get(self.kind)
        if not target:
            return ""  # local backend, or the task ended before a job existed
        return URLS[self.kind](target["name"], target["region"])


class SageMakerTrainingJobLink(_ConsoleLink):
    """"SageMaker training job": the console page of the job the task created or re-attached to."""

    name = "SageMaker training job"
    kind = "training_job"


class TrainingLogsLink(_ConsoleLink):
    """"Training logs": every host's CloudWatch log stream of the job."""

    name = "Training logs"
    kind = "training_logs"


class ProcessingJobLink(_ConsoleLink):
    """"SageMaker processing job": the evaluation's processing job."""

    name = "SageMaker processing job"
    kind = "processing_job"


class ModelPackageLink(_ConsoleLink):
    """"Model package": the version the task registered."""

    name = "Model package"
    kind = "model_package"
