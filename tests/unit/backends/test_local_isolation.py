"""How each emulated host of a local job is isolated (issue 24, build item 1): the strongest variant this machine
allows is chosen (a PID and mount namespace made directly, else inside a user namespace, else a mount namespace
alone, else the fallback without namespaces), each variant starts the host as it should, and a pid inside a host's
PID namespace is translated to the one this machine knows."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.local import container, host_init
from trainops.backends.local.processes import host_pid, pid_namespace_of
from trainops.runtime.processes import process_start_ticks

CAP_SYS_ADMIN = 21


def _machine(*refused: str):
    """A `works` of a machine whose kernel refuses the variants named; records what was asked."""
    asked: list[str] = []

    def works(variant: str) -> bool:
        asked.append(variant)
        return variant not in refused

    return works, asked


@pytest.mark.parametrize(("refused", "chosen"), [
    ((), "pid"),                                                   # root
    (("pid",), "user-pid"),                                        # unprivileged, user namespaces allowed
    (("pid", "user-pid"), "mount"),                                # PID namespaces refused (a seccomp filter)
    (("pid", "user-pid", "mount"), "user-mount"),
    (("pid", "user-pid", "mount", "user-mount"), None),            # no namespace at all: the fallback
])
def test_the_strongest_variant_the_machine_allows_is_chosen(refused, chosen):
    works, asked = _machine(*refused)
    assert container.choose_isolation(works, {}) == chosen
    assert asked == list(container.ISOLATIONS[:len(refused) + 1])  # tried in order, stopping at the first that works


def test_the_settings_turn_namespaces_off_or_ask_for_the_user_namespace_variant():
    works, asked = _machine()
    assert container.choose_isolation(works, {"TRAINOPS_LOCAL_NAMESPACE": "0"}) is None and asked == []
    assert container.choose_isolation(works, {"TRAINOPS_LOCAL_PID_NAMESPACE": "0"}) == "mount"
    assert container.choose_isolation(_machine("mount")[0], {"TRAINOPS_LOCAL_PID_NAMESPACE": "0"}) == "user-mount"
    assert container.choose_isolation(works, {"TRAINOPS_LOCAL_PID_NAMESPACE": "user"}) == "user-pid"
    assert container.choose_isolation(_machine("user-pid")[0], {"TRAINOPS_LOCAL_PID_NAMESPACE": "user"}) \
        == "user-mount"
    assert container.choose_isolation(works, {"TRAINOPS_LOCAL_PID_NAMESPACE": "1"}) == "pid"


@pytest.mark.parametrize("variant", [*container.ISOLATIONS, None])
def test_each_variant_starts_the_host_with_its_own_launcher(tmp_path, monkeypatch, variant):
    """One launcher for every variant (`host_init`, which holds the job's locks until its host has ended), told the
    variant; with a namespace the entrypoint runs through the mount script, without one its /opt/ml paths are the
    host's base directory."""
    monkeypatch.setattr(container, "isolation", lambda: variant)
    layout = HostLayout("algo-1", tmp_path / "hosts" / "algo-1")
    argv = container.isolate(["/image/python", "/opt/ml/code/train.py"], layout, tmp_path, ["algo-1"])
    assert argv[:6] == [sys.executable, "-I", "-S", os.path.abspath(host_init.__file__), variant or "none",
                        str(container.init_report(tmp_path, "algo-1"))]
    if variant is None:
        assert argv[6:] == ["/image/python", str(layout.base_dir / "code" / "train.py")]
    else:
        assert argv[6:8] == [shutil.which("sh", path=container.SAFE_PATH), "-c"]
        assert argv[-2:] == ["/image/python", "/opt/ml/code/train.py"]


def test_a_real_probe_agrees_with_what_this_process_may_do():
    """The choice is the first variant that really starts here; without CAP_SYS_ADMIN the plain PID namespace is
    refused by the kernel, with it (root here) that is the variant chosen."""
    works = {variant: container.isolation_works(variant) for variant in container.ISOLATIONS}
    chosen = container.choose_isolation(works.__getitem__, {})
    assert chosen == next((variant for variant in container.ISOLATIONS if works[variant]), None)
    effective = next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                     if line.startswith("CapEff:"))
    if not int(effective, 16) & (1 << CAP_SYS_ADMIN):
        assert not works["pid"]
    else:
        assert chosen == "pid"


def test_a_pid_outside_a_namespace_is_itself_while_that_process_runs():
    own = os.getpid()
    assert host_pid(own, process_start_ticks(own), None) == own
    assert host_pid(own, (process_start_ticks(own) or 0) + 1, None) is None  # a reused pid is not ours


@pytest.mark.skipif(not container.pid_namespaces_available(), reason="no PID namespace on this machine")
@pytest.mark.parametrize("user_namespace", [False, True])
def test_a_pid_inside_a_hosts_namespace_is_translated_from_the_kernels_own_record(tmp_path, user_namespace):
    variant = "user-pid" if user_namespace else "pid"
    if not container.isolation_works(variant):
        pytest.skip(f"{variant} is refused here")
    # The host's launcher: its init is pid 1, the command (sh, pid 2) writes its own pid as it sees it, then sleeps.
    seen = tmp_path / "pid"
    launcher = subprocess.Popen([sys.executable, "-I", "-S", host_init.__file__, variant, str(tmp_path / "init"),
                                 "/bin/sh", "-c", f'echo $$ > {seen}.tmp && mv {seen}.tmp {seen} && exec sleep 60'])
    try:
        deadline = time.monotonic() + 30
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        inside = int(seen.read_text())
        namespace = pid_namespace_of(launcher.pid)
        assert namespace and namespace != os.readlink("/proc/self/ns/pid")
        outside = host_pid(inside, None, namespace)
        assert outside is not None and outside != inside
        # The shell writes the pid file before it execs sleep: under load the test can look in between.
        while not Path(f"/proc/{outside}/cmdline").read_bytes().startswith(b"sleep\0") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Path(f"/proc/{outside}/cmdline").read_bytes().startswith(b"sleep\0")
        assert host_pid(inside, process_start_ticks(outside), namespace) == outside
        assert host_pid(inside, (process_start_ticks(outside) or 0) + 1, namespace) is None
        assert host_pid(inside, None, os.readlink("/proc/self/ns/pid")) != outside  # another namespace's pid
        os.kill(outside, signal.SIGKILL)  # the host's command, killed from this machine: the host ends as it did
        assert launcher.wait(timeout=30) == -signal.SIGKILL
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


def test_the_images_tools_are_found_next_to_its_python_then_in_trainops_own_environment(tmp_path, monkeypatch):
    """Item 7: what a local host runs as mpirun is found from the image's Python and trainops' own PATH; the job's
    environment is not even an input (`container.image_tool` takes none)."""
    image = tmp_path / "image" / "bin"
    image.mkdir(parents=True)
    for name in ("python3", "mpirun"):
        (image / name).write_text("#!/bin/sh\n")
        (image / name).chmod(0o755)
    assert container.image_tool("mpirun", str(image / "python3")) == str(image / "mpirun")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "mpirun").write_text("#!/bin/sh\n")
    (mine / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", str(mine))
    assert container.image_tool("mpirun", str(tmp_path / "bare" / "python3")) == str(mine / "mpirun")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert container.image_tool("mpirun", "/nonexistent/python3") == shutil.which("mpirun", path=container.SAFE_PATH)
