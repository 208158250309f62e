"""A 2-host torch (gloo) job through the ray backend on the real test cluster: one Ray job of the job's name, its
driver's placement group putting host algo-1 and algo-2 on the two nodes (STRICT_SPREAD), each host's runtime giving
its rank the SageMaker contract; the ranks all-reduce, host 1 packs the model, the job is Completed. In the default
mode (the code and the trainops runtime travel in the job's runtime_env) and in ``shared_dir`` mode (the job laid out
in a directory every node sees, as on Slurm: nothing shipped, the nodes' Python imports trainops, which the test
cluster's nodes, running this environment, have)."""

from __future__ import annotations

import json
import re
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
    print("CONTRACT " + json.dumps({
        "rank": dist.get_rank(), "world": dist.get_world_size(), "host": os.environ["SM_CURRENT_HOST"],
        "hosts": json.loads(os.environ["SM_HOSTS"]), "sum": total.item(), "epochs": hyperparameters.get("epochs"),
        "model_dir": os.environ["SM_MODEL_DIR"]}), flush=True)
    if dist.get_rank() == 0:
        with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as model:
            model.write(str(total.item()))
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


def run_gloo_job(ray_cluster, tmp_path, name: str, settings: dict, given: dict) -> dict:
    """Submit the 2-host gloo job from inside the cluster's namespace and wait for it; what the submitter saw."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    done = ray_cluster.run([sys.executable, "-c", SUBMIT, str(code), name, json.dumps(settings), json.dumps(given)],
                           timeout=250, env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == "Completed", "\n".join(seen["lines"][-60:])
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
