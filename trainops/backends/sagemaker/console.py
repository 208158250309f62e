"""The AWS console pages of SageMaker's jobs: a training job and its CloudWatch logs, a processing job (the
evaluation), a model package (a registered version). `SageMakerBackend.links` offers them to every front end (the
Airflow operators' extra links); standard library only.
"""

from __future__ import annotations

from urllib.parse import quote


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


def links(kind: str, name: str, region: str | None) -> dict[str, str]:
    """Link -> URL of a job of ``kind`` called ``name`` in ``region`` (a model's region is in its ARN); none
    without a region."""
    if kind == "model" and name.startswith("arn:"):
        region = name.split(":")[3] or region
    if not name or not region:
        return {}
    if kind == "training":
        return {"job": training_job_console_url(name, region), "logs": training_logs_url(name, region)}
    if kind == "evaluation":
        return {"job": processing_job_console_url(name, region)}
    if kind == "model" and name.startswith("arn:"):
        return {"job": model_package_console_url(name, region)}
    return {}
