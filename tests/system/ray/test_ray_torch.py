"""A 2-host torch (gloo) job through the ray backend on the real test cluster: one Ray job of the job's name, its
driver's placement group putting host algo-1 and algo-2 on the two nodes (STRICT_SPREAD), each host's runtime giving
its rank the SageMaker contract; the ranks all-reduce, host 1 packs the model, the job is Completed. In the default
mode (the code and the trainops runtime travel in the job's runtime_env) and in ``shared_dir`` mode (the job laid out
in a directory every node sees, as on Slurm: nothing shipped, the nodes' Python imports trainops, which the test
cluster's nodes, running this environment, have)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import textwrap

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

TRAIN = textwrap.dedent("""
    import json, os
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    hyperparameters = json.load(open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")))
    channel = os.environ.get("SM_CHANNEL_TRAIN")
    data = open(os.path.join(channel, "data.txt")).read() if channel else None
    print("CONTRACT " + json.dumps({
        "rank": dist.get_rank(), "world": dist.get_world_size(), "host": os.environ["SM_CURRENT_HOST"],
        "hosts": json.loads(os.environ["SM_HOSTS"]), "sum": total.item(), "epochs": hyperparameters.get("epochs"),
        "model_dir": os.environ["SM_MODEL_DIR"], "data": data}), flush=True)
    if dist.get_rank() == 0:
        with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as model:
            model.write(str(total.item()))
        if data is not None:
            with open(os.path.join(os.environ["SM_MODEL_DIR"], "data.txt"), "w") as copy:
                copy.write(data)
    dist.destroy_process_group()
""")

SUBMIT = textwrap.dedent("""
    import json, sys
    from trainops.backends import get_backend
    from trainops.spec.loader import parse_job_spec

    code, name, settings, given = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    backend = get_backend("ray", options={"gpus_per_host": 0, **settings}, poll_seconds=0.5)  # a CPU cluster: gloo
    spec = parse_job_spec({"name": "gloo", "entry_point": "train.py", "source_dir": code,
                           "instance_type": "ml.g5.xlarge", "instance_count": 2, "max_run": 600,
                           "hyperparameters": {"epochs": 2}, **given,
                           "distribution": {"type": "torch_distributed", "processes_per_host": 1}})
    lines = []
    handle = backend.submit(spec, name, log=lines.append)
    result = backend.wait(handle, log=lines.append)
    print(json.dumps({"status": result.status.value, "reason": result.failure_reason, "lines": lines,
                      "model": result.model_artifact}))
""")


def run_gloo_job(ray_cluster, tmp_path, name: str, settings: dict, given: dict, env: dict | None = None,
                 status: str = "Completed") -> dict:
    """Submit the 2-host gloo job from inside the cluster's namespace and wait for it; what the submitter saw."""
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(TRAIN)
    done = ray_cluster.run([sys.executable, "-c", SUBMIT, str(code), name, json.dumps(settings), json.dumps(given)],
                           timeout=250, env={"TRAINOPS_HOME": str(tmp_path / "home"), **(env or {})})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == status, "\n".join(seen["lines"][-60:])
    return seen


def contracts_of(seen: dict) -> dict[int, tuple[str | None, dict]]:
    """Each rank's CONTRACT record with the host its line was prefixed with, both hosts' contract checked."""
    contracts = {}
    for line in seen["lines"]:
        if "CONTRACT " in line:
            prefix = re.search(r"\[(algo-\d+)\] ", line)  # Ray's own actor prefix comes first
            host = prefix.group(1) if prefix else None
            record = json.loads(line.split("CONTRACT ", 1)[1])
            contracts[record["rank"]] = (host, record)
    assert sorted(contracts) == [0, 1], "\n".join(seen["lines"][-60:])
    assert {record["host"] for _, record in contracts.values()} == {"algo-1", "algo-2"}
    for host, record in contracts.values():
        assert host == record["host"]  # the line is prefixed with the host it ran on
        assert record["world"] == 2 and record["sum"] == 3.0 and record["epochs"] == "2"  # SageMaker writes hyperparameters as text
        assert record["hosts"] == ["algo-1", "algo-2"]
    return contracts


def test_a_two_host_gloo_job_completes_with_the_contract_on_every_rank(ray_cluster, tmp_path):
    output = tmp_path / "output"
    seen = run_gloo_job(ray_cluster, tmp_path, "gloo-1", {}, {"output_path": output.as_uri()})
    contracts_of(seen)
    with tarfile.open(output / "gloo-1" / "output" / "model.tar.gz") as archive:
        assert archive.extractfile("model.txt").read() == b"3.0"


def test_in_shared_dir_mode_the_job_is_laid_out_in_the_shared_directory_and_packs_its_model_there(ray_cluster,
                                                                                                  tmp_path):
    shared = tmp_path / "shared"  # this machine's disk: both nodes of the test cluster see it
    seen = run_gloo_job(ray_cluster, tmp_path, "gloo-shared-1", {"shared_dir": str(shared)}, {})
    for host, record in contracts_of(seen).values():
        assert record["model_dir"] == str(shared / "jobs" / "gloo-shared-1" / "hosts" / str(host) / "model")
    model = shared / "output" / "gloo-shared-1" / "output" / "model.tar.gz"  # output_path defaults under shared_dir
    assert seen["model"] == model.as_uri()
    with tarfile.open(model) as archive:
        assert archive.extractfile("model.txt").read() == b"3.0"


#: A moto server inside the cluster's namespace (where the nodes reach it): its port on the first line of its output,
#: stopped when its input closes (and with every process of the namespace when the cluster stops).
MOTO = textwrap.dedent("""
    import sys
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    print(server.get_host_and_port()[1], flush=True)
    sys.stdin.read()
    server.stop()
""")

S3 = textwrap.dedent("""
    import sys, boto3

    s3 = boto3.client("s3")
    if sys.argv[1] == "put":
        s3.create_bucket(Bucket="data")
        s3.put_object(Bucket="data", Key="train/data.txt", Body=b"from s3")
    else:
        s3.download_file("data", sys.argv[2], sys.argv[3])
""")


def test_s3_channels_are_downloaded_on_each_host_and_the_model_uploaded_to_an_s3_output(ray_cluster, tmp_path):
    moto = subprocess.Popen(ray_cluster.inside([sys.executable, "-c", MOTO]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert moto.stdout is not None
        aws = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": f"http://127.0.0.1:{int(moto.stdout.readline())}"}
        ray_cluster.run([sys.executable, "-c", S3, "put"], env=aws, timeout=120, check=True)
        # The nodes' credentials and endpoint come in the job's runtime_env (on AWS: the nodes' role).
        seen = run_gloo_job(ray_cluster, tmp_path, "gloo-s3-1", {"runtime_env": {"env_vars": aws}},
                            {"inputs": {"train": "s3://data/train/"}, "output_path": "s3://data/out"}, env=aws)
        for _, record in contracts_of(seen).values():
            assert record["data"] == "from s3"  # each host's copy of the channel
        assert seen["model"] == "s3://data/out/gloo-s3-1/output/model.tar.gz"
        fetched = tmp_path / "model.tar.gz"
        ray_cluster.run([sys.executable, "-c", S3, "get", "out/gloo-s3-1/output/model.tar.gz", str(fetched)],
                        env=aws, timeout=120, check=True)
        with tarfile.open(fetched) as archive:
            assert archive.extractfile("model.txt").read() == b"3.0"
            assert archive.extractfile("data.txt").read() == b"from s3"
        # A channel the nodes cannot download fails its host before training, the reason naming the channel.
        failed = run_gloo_job(ray_cluster, tmp_path, "gloo-s3-2", {"runtime_env": {"env_vars": aws}},
                              {"inputs": {"train": "s3://no-such-bucket/train/"}, "output_path": "s3://data/out"},
                              env=aws, status="Failed")
        assert "could not be laid out" in failed["reason"] and "inputs.train" in failed["reason"], failed["reason"]
        assert "no-such-bucket" in failed["reason"], failed["reason"]
        assert not any("CONTRACT " in line for line in failed["lines"])  # no rank ran
    finally:
        moto.communicate(timeout=60)
