"""The KFP train component on the SageMaker backend, run by kfp.local (SubprocessRunner: the component is a process of
its own, as in a pod) against a plain moto server with the default settings: the preflight runs, notes that the
account's SageMaker quotas cannot be read there (moto has none), and the job is created with the code uploaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import boto3
import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

BUCKET = "trainops-kfp-moto"
SPEC = {"name": "kfp-moto", "role": "arn:aws:iam::123456789012:role/SageMakerTrainingRole", "region": "us-east-1",
        "framework_version": "2.3.0", "py_version": "py311", "entry_point": "train.py", "source_dir": "src",
        "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
        "distribution": {"torch_distributed": {"enabled": True}}, "inputs": {"train": f"s3://{BUCKET}/data/"},
        "output_path": f"s3://{BUCKET}/kfp"}
RUN = textwrap.dedent("""
    import json, sys
    import kfp.local
    from trainops.components.factory import build_components
    from trainops.components.settings import LOCAL_SETTINGS

    root, spec = sys.argv[1], sys.argv[2]
    kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=root + "/kfp")
    task = build_components(LOCAL_SETTINGS).train(
        spec_json=spec, spec_dir=".", backend="sagemaker", workdir=root, pipeline_dir=root, channels_json="",
        job_name="kfp-moto-1", name_base="", run_key="", processes_per_host=0, region="", retries_json="")
    print("OUTPUTS", json.dumps({"job_name": task.outputs["job_name"], "status": task.outputs["status"],
                                 "model_artifact": task.outputs["model_artifact"]}))
""")


def test_the_train_component_submits_to_sagemaker_with_the_preflight_on(aws_environment, tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), json.dumps(SPEC)], capture_output=True,
                          text=True, timeout=240, cwd=str(tmp_path), env=dict(os.environ))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("OUTPUTS ")]
    outputs = json.loads(line.split(" ", 1)[1])
    assert (outputs["job_name"], outputs["status"]) == ("kfp-moto-1", "Completed")
    assert outputs["model_artifact"] == f"s3://{BUCKET}/kfp/kfp-moto-1/output/model.tar.gz"
    assert ("preflight: the account's service quotas not checked: servicequotas:ListServiceQuotas failed (500: "
            "500 Internal Server Error)") in output
    stored = boto3.client("sagemaker").describe_training_job(TrainingJobName="kfp-moto-1")
    assert stored["ResourceConfig"]["InstanceCount"] == 2
    keys = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="kfp/kfp-moto-1/")["Contents"]}
    assert "kfp/kfp-moto-1/trainops/code/train.py" in keys
