"""SageMaker's training service on the in-process moto server: jobs that run, log, fail and stop.

moto 5.2 records a CreateTrainingJob and reports it ``Completed`` at once; it runs nothing, writes no logs and has no
``StopTrainingJob``. `TrainingService.install` teaches the moto server what the service does with a job, so a
backend's tests see a job's life as a user of SageMaker sees it, through the real API calls only:

- CreateTrainingJob: the job reads ``InProgress`` / ``Starting``; the service then fetches the job's code channel
  (``trainops_code``) from the moto S3 the backend uploaded it to and runs the job's program
  (``sagemaker_program``) with the request's ``Environment`` and ``SM_MODEL_DIR``, on this machine: one host;
- while it runs: ``Training`` (with ``TrainingStartTime`` and its transition), each line it prints a CloudWatch
  event in ``/aws/sagemaker/TrainingJobs``, stream ``<job>/algo-1-<epoch>``, as the service writes them;
- exit 0: the model directory uploaded as ``<output>/<job>/output/model.tar.gz``, then ``Completed``; another exit:
  ``Failed`` with the service's ``AlgorithmError`` reason; both with ``BillableTimeInSeconds``;
- StopTrainingJob (which moto lacks): ``Stopping``, the program terminated, then ``Stopped``.

What it does not do: ``MaxRuntimeInSeconds`` is not enforced (the service would stop the job itself); one host
whatever ``InstanceCount`` says; the trainops runtime launcher (the request's entrypoint) is not run: the program is.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from support.moto_server import ACCOUNT_ID, REGION

LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class TrainingService:
    """Runs the training jobs created on the moto server at ``endpoint``; ``install()`` then ``uninstall()``."""

    def __init__(self, endpoint: str, workdir: str | os.PathLike[str]):
        self.endpoint = endpoint
        self.workdir = Path(workdir)
        self._processes: dict[str, subprocess.Popen[str]] = {}
        self._stopping: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._undo: list[Any] = []

    # --- the moto server's handlers ---------------------------------------------------------------------------
    def install(self) -> TrainingService:
        from moto.sagemaker.responses import SageMakerResponse

        service = self
        create = SageMakerResponse.create_training_job

        def create_training_job(response: Any) -> Any:
            answer = create(response)
            request = json.loads(response.body)
            service._started(request)
            return answer

        def stop_training_job(response: Any) -> Any:
            from moto.core.responses import EmptyResult

            service._stop(response._get_param("TrainingJobName"))
            return EmptyResult()

        had_stop = "stop_training_job" in SageMakerResponse.__dict__
        SageMakerResponse.create_training_job = create_training_job  # type: ignore[method-assign]
        SageMakerResponse.stop_training_job = stop_training_job  # type: ignore[attr-defined]

        def undo() -> None:
            SageMakerResponse.create_training_job = create  # type: ignore[method-assign]
            if not had_stop:
                del SageMakerResponse.stop_training_job  # type: ignore[attr-defined]

        self._undo.append(undo)
        return self

    def uninstall(self) -> None:
        for name in list(self._processes):
            self._stop(name)
        for thread in self._threads:
            thread.join(timeout=60)
        for undo in reversed(self._undo):
            undo()

    # --- a job's life -----------------------------------------------------------------------------------------
    @staticmethod
    def _job(name: str) -> Any:
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[ACCOUNT_ID][REGION].training_jobs[name]

    def _client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="testing",
                            aws_secret_access_key="testing")

    def _started(self, request: dict[str, Any]) -> None:
        from moto.core.utils import utcnow

        name = request["TrainingJobName"]
        job = self._job(name)
        now = utcnow()
        job.training_job_status, job.secondary_status = "InProgress", "Starting"
        job.training_start_time = job.training_end_time = None
        job.final_metric_data_list = []  # moto's made-up metric would read as the job's activity
        job.secondary_status_transitions = [{"Status": "Starting", "StartTime": now,
                                             "StatusMessage": "Preparing the instances for training"}]
        thread = threading.Thread(target=self._run, args=(name, request), name=f"sagemaker-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _transition(self, job: Any, status: str, message: str) -> None:
        from moto.core.utils import utcnow

        now = utcnow()
        for transition in job.secondary_status_transitions:
            transition.setdefault("EndTime", now)
        job.secondary_status_transitions.append({"Status": status, "StartTime": now, "StatusMessage": message})
        job.secondary_status = status
        job.last_modified_time = now

    def _run(self, name: str, request: dict[str, Any]) -> None:
        job = self._job(name)
        try:
            directory = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.workdir))
            code, model = directory / "code", directory / "model"
            model.mkdir()
            self._download(request, "trainops_code", code)
            program = json.loads(request["HyperParameters"]["sagemaker_program"])
        except Exception as error:  # noqa: BLE001 - the service reports what it could not set up as the job's failure
            self._end(job, "Failed", f"ClientError: could not prepare the job's code: {error}", billable=0)
            return
        stream = f"{name}/algo-1-{int(time.time())}"
        logs = self._client("logs")
        try:
            logs.create_log_group(logGroupName=LOG_GROUP)
        except logs.exceptions.ResourceAlreadyExistsException:
            pass
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        environment = {**{key: value for key, value in os.environ.items() if not key.startswith("AWS_")},
                       **(request.get("Environment") or {}), "SM_MODEL_DIR": str(model)}
        environment.pop("PYTHONPATH", None)  # the request's points into /opt/ml, which is not here
        with self._lock:
            if name in self._stopping:
                self._end(job, "Stopped", None, billable=0)
                return
            from moto.core.utils import utcnow

            job.training_start_time = utcnow()
            self._transition(job, "Training", "Training image download completed. Training in progress.")
            started = time.monotonic()
            process = subprocess.Popen([sys.executable, "-u", program], cwd=code, env=environment, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            self._processes[name] = process
        assert process.stdout is not None
        for line in process.stdout:
            logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=[
                {"timestamp": int(time.time() * 1000), "message": line.rstrip("\n")}])
        code_exit = process.wait()
        billable = max(1, round(time.monotonic() - started))
        with self._lock:
            self._processes.pop(name, None)
            stopped = name in self._stopping
        if stopped:
            self._end(job, "Stopped", None, billable=billable)
        elif code_exit == 0:
            self._transition(job, "Uploading", "Uploading generated training model")
            self._upload_model(model, job.model_artifacts["S3ModelArtifacts"])
            self._end(job, "Completed", None, billable=billable)
        else:
            self._end(job, "Failed", f"AlgorithmError: ExecuteUserScriptError: Command \"python {program}\", "
                                     f"exit code: {code_exit}", billable=billable)

    def _end(self, job: Any, status: str, reason: str | None, *, billable: int) -> None:
        from moto.core.utils import utcnow

        self._transition(job, status, {"Completed": "Training job completed", "Failed": reason or "",
                                       "Stopped": "Training job stopped"}[status])
        job.secondary_status_transitions[-1]["EndTime"] = utcnow()
        job.training_end_time = utcnow()
        job.billable_time_in_seconds = job.training_time_in_seconds = billable
        if reason:
            job.failure_reason = reason
        job.training_job_status = status

    def _stop(self, name: str) -> None:
        job = self._job(name)
        with self._lock:
            if job.training_job_status != "InProgress":
                return
            self._stopping.add(name)
            job.training_job_status = "Stopping"
            self._transition(job, "Stopping", "Stopping the training job")
            process = self._processes.get(name)
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    # --- S3 -------------------------------------------------------------------------------------------------
    def _download(self, request: dict[str, Any], channel: str, into: Path) -> None:
        source = next(item["DataSource"]["S3DataSource"]["S3Uri"] for item in request["InputDataConfig"]
                      if item["ChannelName"] == channel)
        bucket, _, prefix = source[len("s3://"):].partition("/")
        s3 = self._client("s3")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                target = into / item["Key"][len(prefix):].lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())

    def _upload_model(self, model: Path, uri: str) -> None:
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            for path in sorted(model.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(model)))
        bucket, _, key = uri[len("s3://"):].partition("/")
        self._client("s3").put_object(Bucket=bucket, Key=key, Body=archive.getvalue())
