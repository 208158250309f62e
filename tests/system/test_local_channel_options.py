"""`trainops run` on the local engine honours the channel options (issue 46 item 2): a heterogeneous job whose
gzip channel, sharded over the shuffled objects, goes only to the training group's hosts, and whose other channel
goes only to the data group's host."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

SCRIPT = """
import json, os
data = os.path.join(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"), "input", "data")
seen = {}
for name in sorted(n for n in os.listdir(data) if not n.startswith("trainops")):
    root = os.path.join(data, name)
    seen[name] = sorted(open(os.path.join(d, f)).read() for d, _, fs in os.walk(root, followlinks=True) for f in fs)
print("SEEN", json.dumps({"host": os.environ["SM_CURRENT_HOST"], "channels": seen}))
"""


def test_gzip_shuffled_shards_and_group_channels(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    (tmp_path / "train").mkdir()
    for index in range(6):
        with gzip.open(tmp_path / "train" / f"part-{index}.txt.gz", "wt") as handle:
            handle.write(f"record {index}")
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.txt").write_text("meta")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: channels\nentry_point: train.py\nsource_dir: src\ninput_mode: Pipe\noutput_path: out\n"
        "instance_groups:\n"
        "  - {instance_group_name: data, instance_type: local, instance_count: 1}\n"
        "  - {instance_group_name: train, instance_type: local, instance_count: 2}\n"
        "inputs:\n"
        "  train: {s3_data: train, distribution: ShardedByS3Key, compression: Gzip, shuffle_config: {seed: 7},\n"
        "          instance_groups: [train]}\n"
        "  meta: {s3_data: meta, instance_groups: [data]}\n")
    result = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(spec), "--workdir",
                             str(tmp_path / "work"), "--job-name", "channels-1"],
                            capture_output=True, text=True, timeout=300, env=dict(os.environ))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    seen = {item["host"]: item["channels"] for item in
            (json.loads(line.split("SEEN ", 1)[1]) for line in output.splitlines() if "SEEN " in line)}
    assert seen["algo-1"] == {"meta": ["meta"]}
    shards = [seen["algo-2"]["train"], seen["algo-3"]["train"]]
    assert set(seen["algo-2"]) == set(seen["algo-3"]) == {"train"}
    assert sorted(shards[0] + shards[1]) == [f"record {index}" for index in range(6)]  # decompressed, all, once
    assert shards != [["record 0", "record 2", "record 4"], ["record 1", "record 3", "record 5"]]  # shuffled
