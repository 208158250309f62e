"""What this machine has: GPUs, NeuronCores, CPUs and a few tools. The only place the runtime probes the host.

Everything here feeds :func:`trainops.runtime.planner.build_plan` as one :class:`HostFacts` value, so plans stay pure
and unit-testable for any instance type (tests pass a ``HostFacts`` made by hand). ``SM_NUM_GPUS`` / ``SM_NUM_NEURONS``
in the environment override detection, as in the AWS toolkit. Torch is never imported here: on a GPU host the NVIDIA
driver's ``/proc`` entries or ``nvidia-smi`` answer in milliseconds, where ``import torch`` takes seconds.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class HostFacts:
    """The facts about this host a launch plan depends on."""

    gpus: int = 0
    neuron_cores: int = 0
    cpus: int = 1
    smddprun: str | None = None  # path of SMDDP's smddprun when the image has it
    mpirun: str = "mpirun"  # what starts an mpirun job: "" when a local host has none (`MPIRUN_SETTING`)
    is_root: bool = False
    runtime_path: str | None = None  # directory to put on the ranks' PYTHONPATH so they can import trainops


#: Set by the local backend to the image's mpirun it found in trainops' own environment ("" for none), after the
#: job's Environment, so a spec's PATH cannot choose it. Unset (SageMaker): ``mpirun`` by name on the image's PATH,
#: as AWS's toolkit runs it; there the container's environment is the image's and the job's, by design.
MPIRUN_SETTING = "TRAINOPS_MPIRUN"


def _int_or_none(text: str | None) -> int | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        return max(0, int(str(text).strip()))
    except ValueError:
        return None


def count_nvidia_gpus(proc_root: str = "/proc/driver/nvidia/gpus", run_nvidia_smi: bool = True) -> int:
    """GPUs this process may use: ``nvidia-smi -L`` (it lists only the GPUs a container was given), else the NVIDIA
    driver's ``/proc`` entries (which list every GPU of the host); 0 when there is no driver."""
    if run_nvidia_smi and shutil.which("nvidia-smi"):
        try:
            listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=False)
        except (OSError, subprocess.SubprocessError):
            listing = None
        if listing is not None and listing.returncode == 0:
            return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))
    return len(glob.glob(os.path.join(proc_root, "*")))


def visible_gpus(detected: int, cuda_visible_devices: str | None) -> int:
    """GPUs a process may use: ``CUDA_VISIBLE_DEVICES`` narrows what the driver has (``""`` or ``-1``: none)."""
    if cuda_visible_devices is None:
        return detected
    entries = [entry for entry in cuda_visible_devices.split(",") if entry.strip()]
    if not entries or entries[0].strip() == "-1":
        return 0
    return min(detected, len(entries))


def count_neuron_cores(sys_root: str = "/sys/class/neuron_device", run_neuron_ls: bool = True) -> int:
    """NeuronCores of the Trainium/Inferentia devices: each device's ``core_count`` in sysfs, else the sum of
    ``nc_count`` in ``neuron-ls --json-output``; 0 when there is no Neuron driver."""
    total = 0
    for device in sorted(glob.glob(os.path.join(sys_root, "neuron*"))):
        try:
            with open(os.path.join(device, "core_count"), encoding="ascii") as handle:  # the driver's, in sysfs
                total += int(handle.read().strip())
        except (OSError, ValueError):
            continue
    if total:
        return total
    if run_neuron_ls and shutil.which("neuron-ls"):
        try:
            listing = subprocess.run(["neuron-ls", "--json-output"], capture_output=True, text=True, timeout=30,
                                     check=False)
            devices = json.loads(listing.stdout or "[]")
        except (OSError, subprocess.SubprocessError, ValueError):
            return 0
        return sum(int(device.get("nc_count", 0)) for device in devices if isinstance(device, dict))
    return 0


def runtime_search_path() -> str | None:
    """The directory holding the ``trainops`` package when a fresh interpreter could only import it through
    ``sys.path`` entries the ranks would not inherit (the current directory, a PYTHONPATH set for the launcher).
    None when it is installed (site-packages, or an editable install's import hook)."""
    spec = importlib.util.find_spec("trainops")
    if spec is None or not spec.origin:
        return None
    root = os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
    site_dirs = {os.path.abspath(path) for path in site.getsitepackages()}
    site_dirs.add(os.path.abspath(site.getusersitepackages()))
    if root in site_dirs:
        return None
    on_path = {os.path.abspath(entry or os.getcwd()) for entry in sys.path}
    return root if root in on_path else None


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a cpuset, ``taskset``), within the cgroup's quota
    (``cpu.max``: a container given 2 CPUs of 64 gets 2), else every CPU of the machine."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as handle:  # the kernel's (cgroupfs), no job's
            quota, period = handle.read().split()[:2]
        if quota != "max" and int(period) > 0:
            count = min(count, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


def detect_host_facts(environ: Mapping[str, str] | None = None) -> HostFacts:
    """Probe this host once: accelerator counts (``SM_NUM_GPUS`` / ``SM_NUM_NEURONS`` override), CPUs, whether
    ``smddprun`` is installed, whether we run as root, and where the ranks find trainops."""
    environ = os.environ if environ is None else environ
    gpus = _int_or_none(environ.get("SM_NUM_GPUS"))
    if gpus is None:
        gpus = visible_gpus(count_nvidia_gpus(), environ.get("CUDA_VISIBLE_DEVICES"))
    neuron_cores = _int_or_none(environ.get("SM_NUM_NEURONS"))
    if neuron_cores is None:
        neuron_cores = count_neuron_cores()
    cpus = _int_or_none(environ.get("SM_NUM_CPUS")) or usable_cpus()
    return HostFacts(
        gpus=gpus,
        neuron_cores=neuron_cores,
        cpus=cpus,
        smddprun=shutil.which("smddprun"),
        mpirun=environ.get(MPIRUN_SETTING, "mpirun"),
        is_root=hasattr(os, "geteuid") and os.geteuid() == 0,
        runtime_path=runtime_search_path(),
    )
