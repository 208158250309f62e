"""A real two-node Ray cluster on this machine, inside a private network namespace, for the ray backend's tests.

Ray binds the machine's routable address and listens on every interface (GCS, raylets, the dashboard, the agents), so
the cluster runs in a network namespace of its own that the test creates (``unshare -n``, loopback up): there its
"every interface" is the namespace's loopback alone, and nothing of it can be reached from the machine's network.
Two xdist workers' clusters live side by side, each in its namespace with Ray's default ports.

A holder process (``unshare -n`` running ``cat`` on a pipe) keeps the namespace; a head (``ray start --head``) and one
worker node (``ray start --address``) run in it through ``nsenter``, each in the foreground (``--block``) under a
temporary directory of the test's, with 2 logical CPUs each and a small object store. Whatever trainops runs against
the cluster runs in the namespace too (`RayCluster.run`, `RayCluster.python`): the Jobs API answers at
``http://127.0.0.1:8265`` there only. From outside it, through a relay (`RayCluster.open_relay`): the cluster starts
one of its own, `RayCluster.api`, which the test process's looks (`RayCluster.get`) and the tests that run trainops
where an Airflow worker would use.

`RayCluster.stop` ends every process of the namespace (found by their network namespace: all and only the
processes this cluster started, Ray's workers and jobs' drivers included), then the holder. Needs root (``unshare
-n``, ``nsenter``) and Ray in the interpreter's environment (``trainops[ray]``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from support import slurm_cluster

#: The Jobs API's address, as seen from inside the namespace.
ADDRESS = "http://127.0.0.1:8265"
#: Logical CPUs of each node (each host of a test job asks one bundle of them).
CPUS_PER_NODE = 2
#: Bytes of each node's object store (Ray's floor is 75 MiB; the tests move no data through it).
OBJECT_STORE_BYTES = 80 * 1024 * 1024
START_SECONDS = 180.0

#: Requests to the relay on this machine's loopback, never through a proxy of the environment.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))

#: The relay's program (`RayCluster.open_relay`), run inside the namespace on a listening socket made outside it.
RELAY = textwrap.dedent("""
    import socket, sys, threading

    listener = socket.socket(fileno=int(sys.argv[1]))  # made outside the namespace: it listens there
    target = ("127.0.0.1", int(sys.argv[2]))  # the Jobs API, inside the namespace

    def pipe(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    while True:
        client, _ = listener.accept()
        try:
            server = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pipe, args=(client, server), daemon=True).start()
        threading.Thread(target=pipe, args=(server, client), daemon=True).start()
""")


def missing() -> str | None:
    """Why no cluster can start here (None: it can)."""
    if os.geteuid() != 0:
        return "a Ray test cluster needs root (unshare -n and nsenter make its private network namespace)"
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or shutil.which("ip") is None:
        return "unshare, nsenter and ip (util-linux, iproute2) are needed for the Ray test cluster's namespace"
    if not ray_binary().exists():
        return f"Ray is not installed in {sys.prefix}: pip install 'trainops[ray]' (make setup does)"
    return None


def ray_binary() -> Path:
    return Path(sys.executable).parent / "ray"


def wait_until(predicate, what: str, timeout: float = START_SECONDS, pause: float = 0.3):
    """The Slurm cluster's condition wait (`support.slurm_cluster.wait_until`) with this cluster's start bound."""
    return slurm_cluster.wait_until(predicate, what, timeout=timeout, pause=pause)


@dataclass
class RayCluster:
    """A running test cluster in its network namespace (``netns``: the path ``nsenter --net=`` takes)."""

    root: Path
    holder: subprocess.Popen
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    started_seconds: float = 0.0
    env: dict[str, str] = field(default_factory=dict)  # the nodes' environment
    api: str = ""  # the Jobs API as this machine reaches it (the cluster's own relay, `open_relay`)
    _relay: tuple[subprocess.Popen, socket.socket] | None = None

    @property
    def netns(self) -> str:
        return f"/proc/{self.holder.pid}/ns/net"

    @property
    def address(self) -> str:
        return ADDRESS

    def inside(self, command: list[str]) -> list[str]:
        """``command`` as run in the cluster's namespace."""
        return ["nsenter", f"--net={self.netns}", "--", *command]

    def client_env(self) -> dict[str, str]:
        """The environment of a client in the namespace (trainops' CLI, a script): ``RAY_ADDRESS`` the cluster's."""
        return {**os.environ, "RAY_ADDRESS": ADDRESS}

    def run(self, command: list[str], *, env: dict[str, str] | None = None, timeout: float = 300.0,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``command`` in the namespace (trainops' CLI, a script), ``RAY_ADDRESS`` set to the cluster's."""
        full_env = {**self.client_env(), **(env or {})}
        return subprocess.run(self.inside(command), env=full_env, capture_output=True, text=True, timeout=timeout,
                              check=check)

    def python(self, code: str, *, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run Python ``code`` in the namespace with this environment's interpreter."""
        return self.run([sys.executable, "-c", code], timeout=timeout)

    def open_relay(self) -> tuple[subprocess.Popen, socket.socket, str]:
        """Start a relay to the Jobs API: ``http://127.0.0.1:PORT`` of this machine's loopback, which a process
        outside the namespace reaches (an Airflow worker, a KFP pod, the test process itself). A listening socket made
        here is handed to a process inside the namespace (``nsenter --net``), which connects each connection to the
        Jobs API there. A socket keeps the namespace it was made in, so no port of the cluster opens to the machine's
        network. Returns the relay's process, the socket (closed by the caller once the relay ends) and the address."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = int(ADDRESS.rsplit(":", 1)[1])
        relay = subprocess.Popen(self.inside([sys.executable, "-c", RELAY, str(listener.fileno()), str(port)]),
                                 pass_fds=(listener.fileno(),))
        return relay, listener, f"http://127.0.0.1:{listener.getsockname()[1]}"

    def get(self, path: str) -> object | None:
        """The JSON the dashboard answers at ``path`` (None while it does not answer), asked from this process
        through the cluster's own relay (`api`): a look in a wait loop starts no process."""
        try:
            with DIRECT.open(self.api + path, timeout=10) as answer:
                return json.loads(answer.read().decode())
        except (OSError, ValueError):  # refused or reset while the head starts, a 5xx, a body that is not JSON
            return None

    def alive_nodes(self) -> list[dict]:
        answer = self.get("/api/v0/nodes?limit=100")
        if not isinstance(answer, dict):
            return []
        nodes = answer.get("data", {}).get("result", {}).get("result", [])
        return [node for node in nodes if node.get("state") == "ALIVE"]

    def pids(self) -> list[int]:
        """Every process in the namespace but the holder (all of them this cluster's)."""
        try:
            mine = os.readlink(self.netns)
        except OSError:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.holder.pid:
                continue
            try:
                if os.readlink(entry / "ns" / "net") == mine:
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    @staticmethod
    def node_arguments() -> list[str]:
        return ["--block", f"--num-cpus={CPUS_PER_NODE}", "--num-gpus=0",
                f"--object-store-memory={OBJECT_STORE_BYTES}", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]

    def start_worker(self) -> None:
        """Start the worker node (again, after `lose_worker`) and wait until Ray counts two alive nodes."""
        log = open(self.root / "worker.log", "ab")  # noqa: SIM115 - the node's output for as long as it runs
        self.processes["worker"] = subprocess.Popen(
            self.inside([str(ray_binary()), "start", "--address=127.0.0.1:6379",
                         "--dashboard-agent-listen-port=52366", *self.node_arguments()]),
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: len(self.alive_nodes()) == 2, "both Ray nodes to be alive")

    def node_processes(self, name: str) -> list[int]:
        """The processes of node ``name`` (``head``, ``worker``): its ``ray start`` and every descendant of it (the
        raylet, its agents, its workers and actors, the ranks they started)."""
        root = self.processes[name].pid
        parents: dict[int, int] = {}
        for pid in self.pids():
            try:
                parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
        found = {root}
        while more := {pid for pid, parent in parents.items() if parent in found} - found:
            found |= more
        return sorted(found)

    def lose_worker(self) -> None:
        """The worker node dies as a machine does: every process of it frozen at once (SIGSTOP, so none can react
        or respawn another), then killed. Ray finds out by its own means (the raylet's health checks)."""
        victims = self.node_processes("worker")
        for signal_number in (signal.SIGSTOP, signal.SIGKILL):
            for pid in victims:
                try:
                    os.kill(pid, signal_number)
                except ProcessLookupError:
                    pass
        self.processes["worker"].wait(timeout=30)

    def stop(self) -> None:
        """End the nodes (their own shutdown first), then whatever is left in the namespace, then the holder."""
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not self.pids(), "every process of the Ray test cluster to end", timeout=60)
        if self._relay is not None:  # a process of the namespace: ended above
            self._relay[0].wait(timeout=30)
            self._relay[1].close()
        if self.holder.stdin is not None:
            self.holder.stdin.close()
        self.holder.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> RayCluster:
    """Start the namespace, the head and the worker node; return once both nodes are alive and the Jobs API answers.

    Ray's session directory lives in a short private directory of /tmp (its Unix sockets' paths must stay under
    108 bytes), not /tmp/ray, which every cluster of the machine would share."""
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="rayt-", dir="/tmp"))
    holder = subprocess.Popen(["unshare", "-n", "--", "sh", "-c", "ip link set lo up && exec cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)
    cluster = RayCluster(root, holder)
    try:
        wait_until(lambda: "UP" in cluster.run(["ip", "-o", "link", "show", "lo"]).stdout.split(">")[0],
                   "the namespace's loopback to come up", timeout=30, pause=0.1)
        relay, listener, cluster.api = cluster.open_relay()  # ended with the namespace's processes by stop()
        cluster._relay = (relay, listener)
        # The nodes' python is this environment's (as a real cluster's python has Ray): a job's `python` finds it.
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0",
               "PATH": os.pathsep.join([str(ray_binary().parent), os.environ.get("PATH", "")]),
               "TMPDIR": str(root / "tmp")}  # the hosts' directories (the driver's) go where stop() removes them
        (root / "tmp").mkdir()
        cluster.env = env
        common = cluster.node_arguments()
        ray = str(ray_binary())
        head_log = open(root / "head.log", "wb")  # noqa: SIM115 - the node's output for as long as it runs
        cluster.processes["head"] = subprocess.Popen(
            cluster.inside([ray, "start", "--head", "--port=6379", "--dashboard-host=127.0.0.1",
                            "--dashboard-port=8265", "--include-dashboard=true", f"--temp-dir={root}/t", *common]),
            env=env, stdout=head_log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: cluster.get("/api/version"), "the Ray head's Jobs API to answer")
        cluster.start_worker()
    except BaseException:
        logs = "".join(f"\n--- {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in
                       sorted(root.glob("*.log")))
        cluster.stop()
        raise AssertionError(f"the Ray test cluster did not start:{logs}") from None
    cluster.started_seconds = time.monotonic() - began
    return cluster
