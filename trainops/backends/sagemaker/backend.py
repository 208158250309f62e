"""One object over the SageMaker service modules, for callers that hold a region and a client factory.

`SageMakerBackend` only binds the factory: every method takes already-rendered request dicts (see
`trainops.backends.sagemaker.render`) or names, and calls the module function of the same purpose. Use the modules
directly when that reads better; this class exists so the CLI, the operators and the steps pass one thing around.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from trainops.backends.sagemaker import cost as costs
from trainops.backends.sagemaker import fsx, processing, registry, training
from trainops.backends.sagemaker import logs as log_reading
from trainops.backends.sagemaker import preflight as checks
from trainops.backends.sagemaker.clients import ClientFactory, default_client_factory


class SageMakerBackend:
    """The SageMaker backend bound to a region and a client factory.

    Args:
        region: the AWS region (None: boto3's own configuration). Ignored when ``client_factory`` is given.
        client_factory: service name -> boto3 client (for example one built from Airflow's ``AwsBaseHook``
            session with `trainops.backends.sagemaker.clients.client_factory_from_session`). Default:
            `default_client_factory(region)`, built on first use so creating the backend costs nothing.
    """

    def __init__(self, region: str | None = None, client_factory: ClientFactory | None = None):
        self.region = region
        self._factory = client_factory

    @property
    def clients(self) -> ClientFactory:
        """The client factory in use."""
        if self._factory is None:
            self._factory = default_client_factory(region=self.region)
        return self._factory

    # Training jobs

    def preflight(self, request: dict[str, Any]) -> None:
        """Check a rendered training request against the account (FSx, VPC, security groups); raise
        `PreflightError` listing every problem."""
        checks.preflight(self.clients, request)

    def submit(self, request: dict[str, Any], if_exists: training.IfExists = "reattach") -> training.SubmitResult:
        """Create the training job (``create_training_job(**request)``), or re-attach / fail / suffix when one of
        that name exists."""
        return training.submit(self.clients, request, if_exists=if_exists)

    def describe(self, job_name: str) -> training.JobSummary:
        """The job's `JobSummary`."""
        return training.describe(self.clients, job_name)

    def wait(self, job_name: str, **options: Any) -> training.JobSummary:
        """Wait for the job to end (options as for `training.wait`: max_run, max_wait, poll_seconds, on_update,
        clock, sleep); raise `TrainingJobFailed` or `WaitTimedOut`."""
        return training.wait(self.clients, job_name, **options)

    def stop(self, job_name: str) -> str:
        """Stop the job; return its status afterwards."""
        return training.stop(self.clients, job_name)

    def logs(self, job_name: str, *, follow: bool = False, poll_seconds: float = 5.0,
             sleep: Callable[[float], None] = time.sleep) -> Iterator[log_reading.LogLine]:
        """The job's log lines from every host, interleaved by time (``line.render()`` gives ``[algo-1] ...``)."""
        return log_reading.iter_log_lines(self.clients, job_name, follow=follow, poll_seconds=poll_seconds, sleep=sleep)

    def cost(self, job_name: str) -> costs.CostEstimate:
        """An estimate of what the job cost (and saved, for spot), from the instance catalog's prices."""
        return costs.estimate_cost(self.describe(job_name), region=self.region)

    # Data, evaluation, registry

    def stage_fsx(self, *, file_system_id: str, s3_uri: str, file_system_path: str, **options: Any) -> fsx.StagingReport:
        """Make an S3 prefix visible on an FSx for Lustre file system (options as for `fsx.stage`)."""
        return fsx.stage(self.clients, file_system_id=file_system_id, s3_uri=s3_uri,
                         file_system_path=file_system_path, **options)

    def evaluate(self, request: dict[str, Any], **options: Any) -> processing.EvaluationResult:
        """Run an evaluation processing job (request from `processing.build_evaluation_request`) and read its
        metrics back."""
        return processing.evaluate(self.clients, request, **options)

    def register(self, **arguments: Any) -> registry.RegisteredModel:
        """Register a model package (arguments as for `registry.register`)."""
        return registry.register(self.clients, **arguments)

    def champion(self, group: str) -> registry.RegisteredModel | None:
        """The latest Approved model package of a group, or None."""
        return registry.champion(self.clients, group)
