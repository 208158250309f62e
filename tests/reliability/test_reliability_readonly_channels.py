"""Issue 39, class 4: an input channel stays read-only for a rank running as root.

A local host mounts each channel read-only on /opt/ml/input/data/<channel>. A rank running as root (the machine's
root with a plain PID namespace, or root of the host's own user namespace) used to `mount -o remount,rw` it and
write into the source data, directly or from a user namespace of its own. The host's entrypoint now runs without
CAP_SYS_ADMIN (`host_init.drop_mount_capability`): both remounts are refused, and the data is untouched.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
from local_breaks import cli

from trainops.backends.local import container

SCRIPT = """import errno, json, os, subprocess
channel = os.environ["SM_CHANNEL_TRAIN"]

def attempt(argv):
    return subprocess.run(argv, capture_output=True, text=True).returncode

def write(name):
    try:
        with open(os.path.join(channel, name), "w") as handle:
            handle.write("the rank wrote here")
        return "written"
    except OSError as error:
        return errno.errorcode[error.errno]

print("RESULT " + json.dumps({
    "uid": os.getuid(),
    "write": write("before.txt"),
    "remount": attempt(["mount", "-o", "remount,rw,bind", channel]),
    "write_after_remount": write("after.txt"),
    "remount_in_own_user_namespace": attempt(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                                              f"mount -o remount,rw,bind {channel} && echo x > {channel}/ns.txt"]),
    "capability_bounding_set": open("/proc/self/status").read().split("CapBnd:")[1].split()[0],
}), flush=True)
"""

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0 or not container.namespaces_available()
                       or not shutil.which("unshare") or not shutil.which("mount"),
                       reason="needs root, mount namespaces, mount and unshare (a rank running as root)"),
]


@pytest.mark.parametrize("variant", ["", "user"])  # the machine's root in a PID namespace; root of a user namespace
def test_a_root_rank_cannot_remount_its_read_only_channel_writable(tmp_path, variant):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("1,2\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: ro\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.m5.large\n"
                    f"instance_count: 1\noutput_path: out\ninputs: {{train: {data}}}\n")
    result = cli("run", str(spec), "--job-name", "ro",
                 env={"TRAINOPS_HOME": str(tmp_path / "home"), container.PID_NAMESPACE_SETTING: variant})
    assert result.returncode == 0, (result.stdout, result.stderr)
    report = json.loads(result.stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert report["uid"] == 0 and report["write"] == "EROFS", report
    assert report["remount"] != 0 and report["write_after_remount"] == "EROFS", report
    assert report["remount_in_own_user_namespace"] != 0, report
    assert not int(report["capability_bounding_set"], 16) & (1 << 21), report  # no CAP_SYS_ADMIN at all
    assert sorted(path.name for path in data.iterdir()) == ["train.csv"]  # the source data is untouched
