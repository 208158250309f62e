"""A small stand-in for Kubeflow Trainer's controller (with JobSet, the Job controller and a kubelet) over the API
emulator of `k8s_api`: for each new TrainJob it makes the JobSet-labelled pods of its ``numNodes`` and runs each
node's command on this machine with the ``PET_*`` environment Trainer's torch runtime gives, then writes the pods'
phases and the TrainJob's ``Complete`` or ``Failed`` condition. A TrainJob deleted while it runs has its nodes'
processes killed (their pods went with the foreground delete).

What it does not do, and the real ones do: schedule pods onto nodes or give each its own network identity (every
node is this machine; node 0's address is 127.0.0.1), pull images, enforce ``activeDeadlineSeconds``, resources,
volumes (the shared directory is this machine's), or retry. It does end a job at its ``activeDeadlineSeconds``
(``Failed``, ``DeadlineExceeded``), and `lose_node` plays a node lost under a running job.

It plays SageMaker HyperPod's training operator too, for each new HyperPodPyTorchJob: the pods of its one replica
spec (``<job>-pod-<i>``, labelled ``HPJob=<job>``), each running its container's command as HyperPod's launcher
(``hyperpodrun``, the command's first word) runs it once the operator gave the pod its rank: the launcher's options
read, its script started (``python -u SCRIPT ARGS``) as its one worker with the torchelastic variables the launcher
gives a worker (``GROUP_RANK``, ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...) over the container's environment; then
the job's ``Completed`` or ``Failed`` condition (after ``Created`` and ``Running``), its ``runPolicy``'s deadline
kept. Not played for HyperPod: the launcher's agent server and the operator's in-place restarts
(``jobMaxRetryCount``), its health checks and log monitoring, Kueue.

With ``quotas`` (LocalQueue -> nodes) it plays Kueue too: a TrainJob labelled with a queue is suspended on creation
(``spec.suspend``, its ``Suspended`` condition True, as Kueue's webhook and Trainer do) and admitted (resumed, then
started) once the nodes its queue has free hold all of its nodes, first come first served; a job that ends or is
deleted gives its nodes back. What real Kueue adds is not played: ClusterQueues shared by cohorts, borrowing,
preemption, resource flavours (a quota here is a count of nodes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from support.k8s_api import HYPERPODJOBS, POD_LABELS, PODS, TRAINJOBS, Store

POLL = 0.05
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class FakeTrainer:
    """Run the TrainJobs of ``store`` until `close`."""

    def __init__(self, store: Store, namespace: str = "ml", quotas: dict[str, int] | None = None):
        self.store, self.namespace = store, namespace
        self.quotas = dict(quotas or {})
        #: queue -> the admitted jobs holding its nodes (name -> nodes); the suspended ones, in arrival order.
        self.admitted: dict[str, dict[str, int]] = {}
        self.suspended: list[str] = []
        self.processes: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.environments: dict[str, list[dict[str, str]]] = {}
        self.started: dict[str, float] = {}
        #: job -> its kind (TRAINJOBS or HYPERPODJOBS) and its pods' names, by node.
        self.kinds: dict[str, str] = {}
        self.pods: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for processes in self.processes.values():
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            for job in self.store.listed(TRAINJOBS, self.namespace):
                name = job["metadata"]["name"]
                if name not in self.processes and name not in self.suspended and self._admits(job):
                    self._start(job)
            for job in self.store.listed(HYPERPODJOBS, self.namespace):
                if job["metadata"]["name"] not in self.processes and len(job["spec"].get("replicaSpecs") or []) == 1:
                    self._start_hyperpod(job)  # (one replica spec: as trainops and the HyperPod CLI make them)
            for name, processes in list(self.processes.items()):
                self._settle(name, processes)
            self._release()

    def _queue(self, job: dict[str, Any]) -> str | None:
        queue = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL)
        return queue if queue in self.quotas else None

    def _admits(self, job: dict[str, Any]) -> bool:
        """Whether the job may start now: no queue of ours, or its queue has its nodes free (Kueue's admission);
        else it is suspended, as Kueue's webhook suspends it, until `_release` admits it."""
        queue, name = self._queue(job), job["metadata"]["name"]
        if queue is None:
            return True
        nodes = int(job["spec"]["trainer"]["numNodes"])
        holding = self.admitted.setdefault(queue, {})
        if name not in self.suspended and sum(holding.values()) + nodes <= self.quotas[queue]:
            holding[name] = nodes
            return True
        if name not in self.suspended:
            self.suspended.append(name)
            self.store.update(TRAINJOBS, self.namespace, name, lambda body: (
                body["spec"].update(suspend=True), body.setdefault("status", {}).update(conditions=[
                    {"type": "Suspended", "status": "True", "reason": "Suspended",
                     "message": f"Kueue: waiting for quota in LocalQueue {queue}"}])))
        return False

    def _release(self) -> None:
        """Give back the nodes of the admitted jobs that ended or were deleted; admit the suspended jobs that fit,
        in arrival order (resumed: ``spec.suspend`` false, ``Suspended`` False)."""
        for holding in self.admitted.values():
            for name in list(holding):
                job = self.store.get(TRAINJOBS, self.namespace, name)
                if job is None or _ended(job):
                    del holding[name]
        for name in list(self.suspended):
            job = self.store.get(TRAINJOBS, self.namespace, name)
            if job is None:
                self.suspended.remove(name)
                continue
            queue, nodes = self._queue(job), int(job["spec"]["trainer"]["numNodes"])
            holding = self.admitted.setdefault(str(queue), {})
            if sum(holding.values()) + nodes > self.quotas[str(queue)]:
                break  # first come, first served: a later job does not overtake it
            holding[name] = nodes
            self.suspended.remove(name)
            self.store.update(TRAINJOBS, self.namespace, name, lambda body: (
                body["spec"].update(suspend=False), body.setdefault("status", {}).update(conditions=[
                    {"type": "Suspended", "status": "False", "reason": "Resumed"}])))
            resumed = self.store.get(TRAINJOBS, self.namespace, name)
            if resumed is not None:
                self._start(resumed)

    def _start(self, job: dict[str, Any]) -> None:
        name, trainer = job["metadata"]["name"], job["spec"]["trainer"]
        nodes = int(trainer["numNodes"])
        environments, commands = [], []
        for index in range(nodes):
            environments.append({**_pod_environment(trainer.get("env") or [], f"{name}-node-0-{index}"),
                                 "PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
                                 "PET_NODE_RANK": str(index), "PET_MASTER_ADDR": "127.0.0.1",
                                 "PET_MASTER_PORT": "29500"})
            commands.append(list(trainer["command"]))
        self._run_pods(TRAINJOBS, name, [f"{name}-node-0-{index}" for index in range(nodes)], commands, environments)

    def _start_hyperpod(self, job: dict[str, Any]) -> None:
        """HyperPod's operator and its launcher: each pod's command is ``hyperpodrun [OPTIONS] SCRIPT ARGS``; the
        script runs as the launcher's one worker on node ``GROUP_RANK``."""
        name = job["metadata"]["name"]
        [replica] = job["spec"]["replicaSpecs"]
        [container] = replica["template"]["spec"]["containers"]
        nodes = int(replica["replicas"])
        launcher, *rest = container["command"]
        options = [word for word in rest if word.startswith("--")]
        script = rest[len(options):]
        assert launcher == "hyperpodrun" and f"--nnodes={nodes}" in options and script, container["command"]
        per_node = next(int(word.split("=", 1)[1]) for word in options if word.startswith("--nproc-per-node="))
        environments, commands = [], []
        for index in range(nodes):
            environments.append({**_pod_environment(container.get("env") or [], f"{name}-pod-{index}"),
                                 "GROUP_RANK": str(index), "RANK": str(index * per_node), "LOCAL_RANK": "0",
                                 "ROLE_RANK": str(index * per_node), "LOCAL_WORLD_SIZE": str(per_node),
                                 "WORLD_SIZE": str(nodes * per_node), "GROUP_WORLD_SIZE": str(nodes),
                                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "23456",
                                 "TORCHELASTIC_RESTART_COUNT": "0"})
            commands.append([sys.executable, "-u", *script])
        self._run_pods(HYPERPODJOBS, name, [f"{name}-pod-{index}" for index in range(nodes)], commands,
                       environments)
        self.store.update(HYPERPODJOBS, self.namespace, name, lambda body: body.setdefault("status", {}).update(
            conditions=[{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]))

    def _run_pods(self, kind: str, name: str, pods: list[str], commands: list[list[str]],
                  environments: list[dict[str, str]]) -> None:
        """The job's pods made (its kind's label) and each node's command started, in a session of its own."""
        started: list[subprocess.Popen[bytes]] = []
        for index, (pod, command, environment) in enumerate(zip(pods, commands, environments, strict=True)):
            self.store.put(PODS, self.namespace, {
                "metadata": {"name": pod, "labels": {POD_LABELS[kind]: name},
                             "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
                "status": {"phase": "Running"}})
            started.append(subprocess.Popen(command, env=environment, start_new_session=True,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
        self.kinds[name], self.pods[name] = kind, pods
        self.processes[name] = started
        self.environments[name] = environments
        self.started[name] = time.monotonic()

    def _end(self, name: str, condition: dict[str, str]) -> None:
        for process in self.processes.get(name, []):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._condition(name, {"status": "True", **condition})

    def _condition(self, name: str, condition: dict[str, str]) -> None:
        """The job's ending condition: a TrainJob's replaces its conditions, a HyperPodPyTorchJob's follows them."""
        kind = self.kinds.get(name, TRAINJOBS)
        self.store.update(kind, self.namespace, name, lambda body: body.setdefault("status", {}).update(
            conditions=[*(((body.get("status") or {}).get("conditions") or []) if kind == HYPERPODJOBS else []),
                        condition]))

    def lose_node(self, name: str, index: int) -> None:
        """Node ``index`` of job ``name`` is lost: its pod disrupted (DisruptionTarget, its node tainted away),
        every node's process ended, the job Failed as JobSet fails it."""
        self.store.update(PODS, self.namespace, self.pods[name][index], lambda pod: pod.update(status={
            "phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True",
                                               "reason": "DeletionByTaintManager"}]}))
        self._end(name, {"type": "Failed", "reason": "JobSetFailed", "message": f"node {index} failed"})

    def _settle(self, name: str, processes: list[subprocess.Popen[bytes]]) -> None:
        job = self.store.get(self.kinds.get(name, TRAINJOBS), self.namespace, name)
        if job is None:  # deleted: its pods went with it; end what they ran
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            return
        if _ended(job):
            return
        deadline = (job["spec"].get("activeDeadlineSeconds")
                    or (job["spec"].get("runPolicy") or {}).get("activeDeadlineSeconds"))
        if deadline and time.monotonic() - self.started[name] > float(deadline):
            self._end(name, {"type": "Failed", "reason": "DeadlineExceeded",
                             "message": "TrainJob exceeded its active deadline"})
            return
        codes = [process.poll() for process in processes]
        if any(code is None for code in codes):
            return
        for index, code in enumerate(codes):
            self.store.update(PODS, self.namespace, self.pods[name][index], lambda pod, code=code: pod.update(
                status={"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
                    {"name": "node", "state": {"terminated": {"exitCode": code,
                                                              "reason": "Completed" if code == 0 else "Error"}}}]}))
        failed = [index for index, code in enumerate(codes) if code != 0]
        done = "Completed" if self.kinds.get(name) == HYPERPODJOBS else "Complete"
        self._condition(name, {"type": "Failed", "status": "True", "reason": "JobSetFailed",
                               "message": f"node {failed[0]} exited with code {codes[failed[0]]}"} if failed
                        else {"type": done, "status": "True", "reason": "JobSetCompleted"})


def _pod_environment(env: list[dict[str, str]], pod: str) -> dict[str, str]:
    """A pod's environment on this machine: ours (no controller's variables), the container's ``env``, its name."""
    return {**{key: value for key, value in os.environ.items()
               if not key.startswith("PET_") and key not in ("GROUP_RANK", "NNODES", "NPROC_PER_NODE")},
            **{item["name"]: item["value"] for item in env}, "HOSTNAME": pod,
            # The image's Python is the test venv's (torch and all): the pods' python3 is found first.
            "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])}


def _ended(job: dict[str, Any]) -> bool:
    return any(condition.get("type") in ("Complete", "Completed", "Failed") and condition.get("status") == "True"
               for condition in (job.get("status") or {}).get("conditions") or [])
