"""A 2-host torch (gloo) job through the ray backend on the real test cluster: one Ray job of the job's name, its
driver's placement group putting host algo-1 and algo-2 on the two nodes (STRICT_SPREAD), each host's runtime giving
its rank the SageMaker contract; the ranks all-reduce, host 1 packs the model, the job is Completed."""

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

    code, output = sys.argv[1], sys.argv[2]
    backend = get_backend("ray", options={"gpus_per_host": 0}, poll_seconds=0.5)  # a CPU cluster: gloo
    spec = parse_job_spec({"name": "gloo", "entry_point": "train.py", "source_dir": code,
                           "instance_type": "ml.g5.xlarge", "instance_count": 2, "max_run": 600,
                           "output_path": "file://" + output, "hyperparameters": {"epochs": 2},
                           "distribution": {"type": "torch_distributed", "processes_per_host": 1}})
    lines = []
    handle = backend.submit(spec, "gloo-1", log=lines.append)
    result = backend.wait(handle, log=lines.append)
    print(json.dumps({"status": result.status.value, "reason": result.failure_reason, "lines": lines}))
""")


def test_a_two_host_gloo_job_completes_with_the_contract_on_every_rank(ray_cluster, tmp_path):
    code, output = tmp_path / "code", tmp_path / "output"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    done = ray_cluster.run([sys.executable, "-c", SUBMIT, str(code), str(output)], timeout=500,
                           env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == "Completed", "\n".join(seen["lines"][-60:])
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
    with tarfile.open(output / "gloo-1" / "output" / "model.tar.gz") as archive:
        assert archive.extractfile("model.txt").read() == b"3.0"
