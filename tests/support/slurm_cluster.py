"""A real two-node Slurm cluster on this machine, for the slurm backend's system tests.

One ``munged``, one ``slurmctld``, two ``slurmd -N n1|n2`` and one ``slurmrestd`` (JWT, API v0.0.38), each in the
foreground as a child of the test process, on free ports and under one private directory, so two test workers
(pytest-xdist) run two clusters side by side. Both nodes are this machine (127.0.0.1, ``CPUs=1`` each). The
cluster's settings that the tests lean on: ``SlurmdTimeout=10`` (a lost node is declared down within seconds, so
its job ends ``NODE_FAIL``), ``MinJobAge=300`` (Slurm's default: an ended job stays listed while the module runs, so
a test can count a name's jobs; forgetting is tested by restarting the controller without its state,
``start_controller(clear=True)``), ``ReturnToService=2`` (a node that comes back is used again).

`stop()` ends every process of the cluster: its daemons, and whatever their ``slurmstepd`` started (found by the
cluster's mark in their environment: the daemons carry ``TRAINOPS_TEST_SLURM``, the jobs' processes
``SLURM_CLUSTER_NAME``). Needs root (slurmd starts the jobs' tasks) and Debian's ``munge``, ``slurm-wlm``,
``slurmrestd`` and ``slurm-wlm-jwt-plugin`` (``make slurm`` installs them).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "slurmrestd", "sbatch", "squeue", "scontrol", "scancel")
JWT_PLUGIN = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so")
MARK = "TRAINOPS_TEST_SLURM"
NODES = ("n1", "n2")
START_SECONDS = 60.0


def missing() -> str | None:
    """Why no cluster can start here (None: it can)."""
    if os.geteuid() != 0:
        return "a Slurm test cluster needs root (slurmd starts the jobs' tasks)"
    absent = [name for name in BINARIES if shutil.which(name) is None]
    if absent or not JWT_PLUGIN.exists():
        return (f"Slurm is not installed ({', '.join(absent) or JWT_PLUGIN.name} missing): make slurm installs munge, "
                "slurm-wlm, slurmrestd and slurm-wlm-jwt-plugin")
    return None


def wait_until(predicate, what: str, timeout: float = 120.0, pause: float = 0.2):
    """``predicate()``'s first true value, looked at every ``pause`` seconds; AssertionError naming ``what`` after
    ``timeout`` (a condition waited on, never a time slept)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(pause)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class SlurmCluster:
    """A running test cluster. ``env``: what a Slurm command or trainops needs to reach it (``SLURM_CONF``)."""

    root: Path
    name: str
    ports: dict[str, int]
    config_dir: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        """slurm.conf, in a directory every user can read (slurmrestd reads it again as nobody)."""
        return self.config_dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['rest']}"

    @property
    def shared_dir(self) -> Path:
        """A directory every node sees (this machine's: both nodes are here), the user's alone."""
        path = self.root / "shared"
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    # --- the daemons ------------------------------------------------------------------------------------------
    def _start(self, key: str, argv: list[str], extra: dict[str, str] | None = None) -> None:
        log = open(self.root / "log" / f"{key}.out", "ab")  # noqa: SIM115 - handed to the child
        environment = {key: value for key, value in self.env.items() if key != "SLURM_JWT"}
        environment.update({MARK: self.name, **(extra or {})})
        self.processes[key] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=environment,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def start_controller(self, clear: bool = False) -> None:
        """Start slurmctld (again); ``clear``: with no saved state, as if every job had been forgotten."""
        self._start("slurmctld", ["slurmctld", "-D", "-f", str(self.conf), *(["-c"] if clear else [])])

    def start_node(self, node: str) -> None:
        self._start(node, ["slurmd", "-D", "-N", node, "-f", str(self.conf)], {f"{MARK}_NODE": node})

    def stop_controller(self) -> None:
        """SIGTERM slurmctld (it saves its state, as a restarting controller does) and wait for it to end."""
        _end(self.processes.pop("slurmctld"))

    def command(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def token(self, lifespan: int = 3600) -> str:
        """A JWT of this user for slurmrestd (``scontrol token``)."""
        output = self.command("scontrol", "token", f"lifespan={lifespan}").stdout.strip()
        return output.split("=", 1)[1]

    def wait_ready(self, nodes: tuple[str, ...] = NODES, timeout: float = START_SECONDS) -> None:
        """Until every node of ``nodes`` is idle (or allocated) and the controller answers."""
        deadline = time.monotonic() + timeout
        while True:
            done = self.command("sinfo", "-h", "-N", "-o", "%N %t", check=False)
            states = dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)
            if done.returncode == 0 and all(states.get(node) in ("idle", "alloc", "mix") for node in nodes):
                return
            for key, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{key} exited ({process.returncode}): {self.log(key)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Slurm test cluster did not come up: {states}; {self.log('slurmctld')}")
            time.sleep(0.2)

    def log(self, key: str) -> str:
        names = {"slurmctld": "slurmctld.log"}
        path = self.root / "log" / names.get(key, f"{key}.out")
        try:
            return path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def node_processes(self, node: str) -> list[int]:
        """The processes of node ``node``: its slurmd and slurmstepd, and the jobs' tasks running there."""
        return [pid for pid, environ in _environments()
                if (environ.get(MARK) == self.name and environ.get(f"{MARK}_NODE") == node)
                or (environ.get("SLURM_CLUSTER_NAME") == self.name and environ.get("SLURMD_NODENAME") == node)]

    def job_processes(self) -> list[int]:
        """Every process the cluster's jobs started (not its daemons)."""
        return [pid for pid, environ in _environments()
                if environ.get("SLURM_CLUSTER_NAME") == self.name and MARK not in environ]

    def lose_node(self, node: str) -> list[int]:
        """A node that vanishes as a machine does: its slurmd killed, every other process of it frozen (SIGSTOP:
        its connections stay open and silent, as a dead host's do). Returns the frozen pids (`release_lost`)."""
        daemon = self.processes.pop(node)
        daemon.kill()
        daemon.wait()
        frozen = [pid for pid in self.node_processes(node) if pid != daemon.pid]
        for pid in frozen:
            _signal(pid, signal.SIGSTOP)
        return frozen

    def release_lost(self, frozen: list[int]) -> None:
        """The lost node's processes gone for good (SIGKILL), as when the machine is replaced."""
        for pid in frozen:
            _signal(pid, signal.SIGKILL)
            _signal(pid, signal.SIGCONT)

    def stop(self) -> None:
        """Every process of the cluster ended: the daemons, then what their jobs left."""
        for key in ("slurmrestd", *NODES, "slurmctld", "munged"):
            process = self.processes.pop(key, None)
            if process is not None:
                _end(process)
        shutil.rmtree(self.config_dir, ignore_errors=True)
        for _ in range(50):
            left = [pid for pid, environ in _environments() if environ.get(MARK) == self.name
                    or environ.get("SLURM_CLUSTER_NAME") == self.name]
            if not left:
                return
            for pid in left:
                _signal(pid, signal.SIGKILL)
                _signal(pid, signal.SIGCONT)
            time.sleep(0.1)


def _end(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def _environments() -> list[tuple[int, dict[str, str]]]:
    """(pid, environment) of every process this user may read."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        found.append((int(entry), {key.decode(errors="replace"): value.decode(errors="replace")
                                   for key, value in pairs}))
    return found


CONFIG = """ClusterName={name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={root}/jwt.key
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
MinJobAge=300
KillWait=5
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PlugStackConfig={config}/plugstack.conf
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n1} CPUs=1 RealMemory=1000
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n2} CPUs=1 RealMemory=1000
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
"""


def start_cluster(root: Path) -> SlurmCluster:
    """Configure and start a cluster under ``root`` (created); `SlurmCluster.stop` ends it."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    for directory in ("munge", "state", "spool", "log", "run"):
        (root / directory).mkdir(mode=0o700, exist_ok=True)
    (root / "munge").chmod(0o755)  # munged wants others to reach its socket's directory
    name = f"tt{os.getpid()}"
    ports = {key: free_port() for key in ("ctld", "n1", "n2", "rest")}
    config_dir = Path(tempfile.mkdtemp(prefix=f"trainops-slurm-{name}-"))
    config_dir.chmod(0o755)
    cluster = SlurmCluster(root=root, name=name, ports=ports, config_dir=config_dir)
    subprocess.run(["mungekey", "-c", "-k", str(root / "munge.key")], check=True, capture_output=True)
    (root / "jwt.key").write_bytes(os.urandom(32))
    (root / "jwt.key").chmod(0o600)
    (config_dir / "plugstack.conf").write_text("")
    cluster.conf.write_text(CONFIG.format(name=name, host=socket.gethostname().split(".")[0], root=root,
                                          config=config_dir, ctld=ports["ctld"], n1=ports["n1"], n2=ports["n2"]))
    for path in (cluster.conf, config_dir / "plugstack.conf"):
        path.chmod(0o644)
    try:
        cluster._start("munged", ["munged", "-F", "-S", str(root / "munge" / "munge.socket"), "--key-file",
                                  str(root / "munge.key"), "--log-file", str(root / "log" / "munged.log"),
                                  "--pid-file", str(root / "run" / "munged.pid"), "--seed-file",
                                  str(root / "munge" / "seed"), "--force"])
        deadline = time.monotonic() + START_SECONDS
        while not (root / "munge" / "munge.socket").exists():
            if time.monotonic() > deadline or cluster.processes["munged"].poll() is not None:
                raise RuntimeError(f"munged did not start: {cluster.log('munged')}")
            time.sleep(0.05)
        cluster.start_controller()
        for node in NODES:
            cluster.start_node(node)
        # slurmrestd will not run as root: it drops to nobody once its socket is open.
        cluster._start("slurmrestd", ["slurmrestd", "-f", str(cluster.conf), "-a", "rest_auth/jwt", "-s",
                                      "openapi/v0.0.38", "-u", "nobody", f"127.0.0.1:{ports['rest']}"],
                       {"SLURM_JWT": "daemon"})
        cluster.wait_ready()
    except BaseException:
        cluster.stop()
        raise
    return cluster
