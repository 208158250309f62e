"""The deferrable path through Airflow itself: ``dag.test()`` runs the training task, which defers; Airflow serializes
the trigger, runs it, and resumes the task with its event (``execute_complete``).

SageMaker is a small in-process fake (moto creates jobs already Completed, so nothing would ever defer there): it walks
each job through InProgress before the end state the job name asks for. The fake is installed by the DAG file itself,
because ``dag.test()`` runs in a subprocess against a temporary Airflow home.
"""

from __future__ import annotations

import textwrap

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = pytest.mark.system

DAG_FILE = textwrap.dedent('''
    """Deferral test DAGs: a SageMaker training task against a fake SageMaker (installed below)."""
    import datetime
    import trainops.operators.common
    import trainops.operators.training
    from airflow.sdk import DAG
    from trainops.operators.training import DistributedTrainingOperator

    CALLS = []


    class FakeSageMaker:
        """Jobs are InProgress for their first three descriptions after creation, then Completed or Failed."""

        def __init__(self):
            self.jobs = {}

        def describe_training_job(self, TrainingJobName):
            CALLS.append(("describe", TrainingJobName))
            if TrainingJobName not in self.jobs:
                from botocore.exceptions import ClientError
                raise ClientError({"Error": {"Code": "ValidationException",
                                            "Message": "Requested resource not found."}}, "DescribeTrainingJob")
            job = self.jobs[TrainingJobName]
            job["seen"] += 1
            status = "InProgress" if job["seen"] <= 3 else job["end"]
            response = {"TrainingJobName": TrainingJobName, "TrainingJobStatus": status,
                        "SecondaryStatus": "Training" if status == "InProgress" else status,
                        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
                        # now: the guards bound a wait from the job's own start (max_run + grace)
                        "CreationTime": datetime.datetime.now(datetime.timezone.utc),
                        "ModelArtifacts": {"S3ModelArtifacts": f"s3://out/{TrainingJobName}/output/model.tar.gz"},
                        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2,
                                           "VolumeSizeInGB": 30}}
            if status == "Completed":
                response.update(BillableTimeInSeconds=42, TrainingTimeInSeconds=50,
                                FinalMetricDataList=[{"MetricName": "loss", "Value": 0.5}])
            if status == "Failed":
                response["FailureReason"] = "AlgorithmError: rank 1 on host algo-2 exited with code 1"
            return response

        def create_training_job(self, **request):
            CALLS.append(("create", request["TrainingJobName"]))
            end = "Failed" if request["TrainingJobName"].startswith("broken") else "Completed"
            self.jobs[request["TrainingJobName"]] = {"seen": 0, "end": end}
            return {"TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/x"}


    class NoLogs:
        def describe_log_streams(self, **kwargs):
            return {"logStreams": []}


    class NoQuotas:
        """An account whose Service Quotas cannot be read: the preflight notes it and the job goes on."""

        def list_service_quotas(self, **kwargs):
            from botocore.exceptions import ClientError
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}},
                              "ListServiceQuotas")


    SAGEMAKER = FakeSageMaker()


    def fake_factory(conn_id, region):
        others = {"service-quotas": NoQuotas()}
        return (lambda service: SAGEMAKER if service == "sagemaker" else others.get(service, NoLogs())), \
            region or "us-east-1"


    trainops.operators.common.aws_client_factory = fake_factory
    trainops.operators.training.aws_client_factory = fake_factory

    SPEC = {"role": "arn:aws:iam::123456789012:role/trainops-test", "region": "us-east-1",
            "framework_version": "2.3.0", "py_version": "py311", "entry_point": "train.py",
            "source_dir": "s3://trainops-test/code/sourcedir.tar.gz", "instance_type": "ml.p4d.24xlarge",
            "launcher": "toolkit",  # the trainops launcher would upload its runtime channel to S3: not faked here
            "instance_count": 2, "distribution": {"torch_distributed": {"enabled": True}},
            "inputs": {"train": "s3://trainops-test/data/"}, "output_path": "s3://out", "max_run": 600}

    for dag_id, name in (("deferred_success", "digits"), ("deferred_failure", "broken")):
        with DAG(dag_id=dag_id, schedule=None) as dag:
            # the preflight runs as a user's does: this account's quotas are not readable (a note)
            DistributedTrainingOperator(task_id="train", spec=dict(SPEC, name=name), backend="sagemaker",
                                        deferrable=True, check_interval=0, retries=0)
        globals()[dag_id] = dag
''')


@pytest.fixture(scope="module")
def dag_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("deferral") / "deferral_dags.py"
    path.write_text(DAG_FILE)
    return path


def test_a_deferred_training_task_resumes_with_the_jobs_result(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "deferred_success")
    assert outcome is not None, done.stdout[-5000:] + done.stderr[-5000:]
    assert outcome["tasks"] == {"train": "success"}
    result = outcome["xcom"]["train"]["return_value"]
    assert (result["status"], result["billable_seconds"], result["metrics"]) == ("Completed", 42, {"loss": 0.5})
    # dag.test() hands execute_complete the event alone (a real triggerer adds the deferral's kwargs): the trigger
    # echoes reattached, so the XCom says it either way
    assert result["reattached"] is False
    assert result["job_name"].startswith("digits-")
    assert "deferring: the triggerer waits for sagemaker training job" in done.stdout + done.stderr
    assert "preflight: the account's service quotas not checked: no permission for servicequotas:ListServiceQuotas" \
        in done.stdout + done.stderr
    link = outcome["xcom"]["train"]["_link_TrainingJobLink"]
    assert link == ("https://console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/" + result["job_name"])


def test_a_failed_job_fails_the_task_after_deferral_with_its_reason(airflow_home, dag_file):  # noqa: F811
    outcome, done = airflow_home.dag_test(dag_file, "deferred_failure")
    assert outcome is not None, done.stdout[-5000:] + done.stderr[-5000:]
    assert outcome["state"] == "failed"
    assert outcome["tasks"] == {"train": "failed"}
    assert "rank 1 on host algo-2 exited with code 1" in done.stdout + done.stderr
