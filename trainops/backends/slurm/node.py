"""What runs on the cluster's nodes for a trainops job: copied into the job's runtime directory and run as a file
(``python -I -S trainops_slurm_node.py COMMAND ...``) by the batch script. Standard library only, like the runtime
beside it (whose failure and record modules it imports from there): the nodes need no trainops installed.

- ``free-port``: print a free TCP port of this node (the batch host: the ranks' rendezvous).
- ``run JOB_DIR``: on every node, one task each. Node ``SLURM_NODEID`` = i is host ``algo-<i+1>``: its contract
  directory (``hosts/algo-<i+1>``, laid out by trainops before submitting) becomes the runtime's base directory, its
  environment is what trainops prepared for that host (``slurm/algo-<i+1>.env.json``) over the node's own, the
  hosts' addresses come from the allocation (host 1 is the batch host, ``SLURM_LAUNCH_NODE_IPADDR``), and the output
  goes to ``logs/algo-<i+1>.log``; then it becomes the runtime (exec), so Slurm's signals reach it directly.
- ``agent JOB_DIR HOST COMMAND...``: mpirun's remote agent (Open MPI's ``plm_rsh_agent``, through the job's
  ``slurm/mpi-agent``): runs Open MPI's daemon on the node of host ``HOST`` as a step of this job that shares its
  resources (``srun --overlap --whole``), with mpirun's environment and that host's prepared one over it, as ssh
  runs it on SageMaker. The step is the job's: ``scancel`` and the time limit end it with the rest.
- ``ended-by-slurm JOB_DIR``: the batch shell's trap when Slurm ends the job itself (``scancel``, the time limit, a
  lost node, preemption: SIGTERM to every process of the job, SIGKILL ``KillWait`` later): how, read from
  slurmstepd's line in the batch log (``*** JOB N ON node CANCELLED AT time [DUE TO TIME LIMIT|PREEMPTION|NODE
  FAILURE] ***``; Slurm's own look says only COMPLETING until the job is gone), written to ``ended.json``, so the end
  of a job nobody watched stays readable once Slurm has forgotten it.
- ``finish JOB_DIR CODE``: on the batch host once the step ended with ``CODE``: host 1's model directory packed
  into ``model.tar.gz`` (and ``output/data`` into ``output.tar.gz``) where the job's output goes, or the root cause
  read from the runtime's records and failure files, with the Slurm node its host ran on (on HyperPod, a node whose
  GPU health check failed is named with the command that asks HyperPod to replace it); either way ``ended.json``
  says so, and the script exits ``CODE``.

Function-local imports (standalone script): this file runs where trainops is not installed, so it imports the
runtime's modules once `_runtime_on_path` has put them on the path.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import sys
import tarfile
import time

PLAN = os.path.join("slurm", "job.json")
AGENT = os.path.join("slurm", "mpi-agent")
ENDED = "ended.json"
#: The most the job's plan or a host's environment file may hold (an environment: at most ARG_MAX, 2 MiB on Linux).
LAYOUT_LIMIT_BYTES = 4 * 1024 * 1024
FAILURE_LIMIT = 1024  # SageMaker's FailureReason shows the first 1,024 characters of the failure file
#: slurmstepd's line in a job's output when Slurm ends it, and the Slurm state each of its endings means.
_SLURM_ENDED = re.compile(r"\*\*\* (JOB|STEP) [0-9.]+ ON (\S+) CANCELLED AT (\S+)"
                          r"(?: DUE TO ([A-Z ]+?))?(?:,[^*]*)? \*\*\*")
_DUE_TO = {"": "CANCELLED", "TIME LIMIT": "TIMEOUT", "PREEMPTION": "PREEMPTED", "NODE FAILURE": "NODE_FAIL"}
_RANGE = re.compile(r"\[([^\[\]]*)\]")


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed node list (``n[1-3,7],gpu-[01-02]``) as names, in order (what ``scontrol show
    hostnames`` prints)."""
    names: list[str] = []
    depth, start = 0, 0
    for index, character in enumerate(text + ","):
        if character == "[":
            depth += 1
        elif character == "]":
            depth -= 1
        elif character == "," and depth == 0:
            item = text[start:index].strip()
            if item:
                names += _expand_one(item)
            start = index + 1
    return names


def _expand_one(item: str) -> list[str]:
    match = _RANGE.search(item)
    if match is None:
        return [item]
    head, tail = item[:match.start()], item[match.end():]
    found = []
    for part in match.group(1).split(","):
        low, _, high = part.partition("-")
        if not high:
            values = [low]
        else:
            width = len(low)
            values = [str(number).zfill(width) for number in range(int(low), int(high) + 1)]
        for value in values:
            found += _expand_one(f"{head}{value}{tail}")
    return found


def _load(path: str) -> dict:
    """One of the files trainops laid out in the job's directory (the plan, a host's environment). The job's ranks
    can write that directory on every node, so it is read as hostile (`read_json`: bounded, a regular file only,
    never blocking on a FIFO); anything but a JSON object ends the node's part with a message naming the file."""
    _runtime_on_path()
    from trainops.runtime.untrusted import read_json, unreadable

    try:
        return read_json(path, LAYOUT_LIMIT_BYTES)  # type: ignore[no-any-return]
    except (OSError, ValueError) as error:
        raise SystemExit(f"trainops: cannot read {unreadable(error)}; submit the job again") from None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def addresses(hosts: list[str], environ: dict[str, str]) -> dict[str, str]:
    """host -> how the other hosts reach it: node i of the step for host i+1, host 1 at the batch host's address."""
    nodes = expand_hostlist(environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or "")
    found = {host: nodes[index] if index < len(nodes) else host for index, host in enumerate(hosts)}
    if environ.get("SLURM_LAUNCH_NODE_IPADDR") and hosts:
        found[hosts[0]] = environ["SLURM_LAUNCH_NODE_IPADDR"]
    return found


def node_environment(overlay: dict[str, str], inherited: dict[str, str], hosts: list[str]) -> dict[str, str]:
    """The runtime's environment: the node's own without PYTHONPATH and any SM_/SAGEMAKER_ variable, then the host's
    prepared one (its PATH before the node's), then the hosts' addresses."""
    environment = {key: value for key, value in inherited.items()
                   if key != "PYTHONPATH" and not key.startswith(("SM_", "SAGEMAKER_"))}
    overlay = dict(overlay)
    path = overlay.pop("PATH", "")
    environment.update(overlay)
    environment["PATH"] = os.pathsep.join(part for part in (path, inherited.get("PATH", "")) if part)
    environment["TRAINOPS_HOST_ADDRESSES"] = json.dumps(addresses(hosts, inherited))
    environment["TRAINOPS_SLURM_NODE"] = inherited.get("SLURMD_NODENAME", "")
    return environment


def mpi_settings(job_dir: str, environ: dict[str, str]) -> dict[str, str]:
    """Where an mpirun launch of this step finds its agent and its hosts meet: a directory of the step's own
    (``slurm/mpi/<job id>.<step id>``), so nothing an earlier step left there is read."""
    step = f"{environ.get('SLURM_JOB_ID', 'job')}.{environ.get('SLURM_STEP_ID', 'step')}"
    return {"TRAINOPS_MPI_AGENT": os.path.join(job_dir, AGENT),
            "TRAINOPS_MPI_MEETING_DIR": os.path.join(job_dir, "slurm", "mpi", step)}


def run(job_dir: str) -> None:
    plan = _load(os.path.join(job_dir, PLAN))
    hosts = list(plan["hosts"])
    index = int(os.environ.get("SLURM_NODEID", "0"))
    if not 0 <= index < len(hosts):
        raise SystemExit(f"trainops: node {index} of the step is not one of the job's {len(hosts)} hosts")
    host = hosts[index]
    base = os.path.join(job_dir, "hosts", host)
    overlay = _load(os.path.join(job_dir, "slurm", f"{host}.env.json"))
    environment = node_environment(overlay, dict(os.environ), hosts)
    environment.update(mpi_settings(job_dir, dict(os.environ)))
    argv = [str(part) for part in plan["argv"]]
    log = open_host_log(job_dir, host)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(base)
    os.execvpe(argv[0], argv, environment)


def agent_command(job_dir: str, host: str, command: list[str], environ: dict[str, str]) -> tuple[list[str], dict]:
    """(argv, environment) that start ``command`` (Open MPI's daemon, as mpirun words it for a remote shell) on the
    node of ``host``: node i of the job for host algo-<i+1>, as the ranks' own step placed them."""
    hosts = list(_load(os.path.join(job_dir, PLAN))["hosts"])
    if host not in hosts:
        raise SystemExit(f"trainops: mpirun asked for host {host!r}, which is not one of the job's hosts ({hosts})")
    nodes = expand_hostlist(environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") or "")
    index = hosts.index(host)
    if index >= len(nodes) or not environ.get("SLURM_JOB_ID"):
        raise SystemExit(f"trainops: no Slurm node for host {host} (the agent runs inside the job's step, whose "
                         f"nodes are {nodes})")
    node = nodes[index]
    overlay = _load(os.path.join(job_dir, "slurm", f"{host}.env.json"))
    overlay.pop("PATH", None)  # mpirun's PATH already leads with the job's
    environment = {**environ, **overlay, "TRAINOPS_SLURM_NODE": node}
    # The daemon's command line is written for a remote shell (ssh joins its words and a shell parses them). No
    # Slurm MPI plugin for it (a cluster's MpiDefault=pmix would serve the daemon a PMIx server of its own): Open
    # MPI's daemon is what serves the ranks their PMIx.
    argv = ["srun", "--overlap", "--whole", f"--jobid={environ['SLURM_JOB_ID']}", "--nodes=1", "--ntasks=1",
            f"--nodelist={node}", "--kill-on-bad-exit=1", "--cpu-bind=none", "--mpi=none", "--quiet", "--export=ALL",
            "/bin/sh", "-c", " ".join(command)]
    return argv, environment


def agent(job_dir: str, host: str, command: list[str]) -> None:
    argv, environment = agent_command(job_dir, host, command, dict(os.environ))
    sys.stdout.flush()
    os.execvpe(argv[0], argv, environment)


def _pack(source: str, directory: int, name: str) -> None:
    """``source``'s files as the gzipped tar ``name`` in the open output ``directory``. The output path may be shared
    with other users, who could plant a link under any name they can guess: `write_file_at` writes the archive under
    a name nobody can guess, created exclusively without following a link, and renames it over ``name`` within the
    open directory (a link planted there is replaced, never written through)."""
    _runtime_on_path()
    from trainops.runtime.destinations import write_file_at

    def write(handle) -> None:
        with tarfile.open(fileobj=handle, mode="w:gz") as tar:
            for entry in sorted(os.listdir(source)) if os.path.isdir(source) else []:
                tar.add(os.path.join(source, entry), arcname=entry)

    write_file_at(directory, name, write, 0o644)  # readable where the output is shared, as before


def open_output(plan: dict) -> int:
    """The job's output directory held open: ``<output_root>/<job>/output`` reached below the output root without
    following a link and refused when another user owns it (`open_destination`), so a ``<job>/output`` link planted
    by another user who can write the output root is never followed. The caller closes it."""
    _runtime_on_path()
    from trainops.runtime.destinations import open_destination

    return open_destination(str(plan["output_root"]), [str(part) for part in plan["output_parts"]])


def open_host_log(job_dir: str, host: str) -> int:
    """``logs/<host>.log`` open for appending: never through a link (the job's ranks can write the job directory),
    never blocking on a FIFO, a regular file only; otherwise the node's part ends naming the file."""
    _runtime_on_path()
    from trainops.runtime.destinations import open_state_file

    path = os.path.join(job_dir, "logs", f"{host}.log")
    try:
        log = open_state_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o600)
    except OSError as error:
        raise SystemExit(f"trainops: cannot open the host's log {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(os.fstat(log).st_mode):
        os.close(log)
        raise SystemExit(f"trainops: the host's log {path} is not a regular file (a FIFO or device was left "
                         "there): remove it and submit the job again")
    os.set_blocking(log, True)
    return log


def _runtime_on_path() -> None:
    """The runtime's files are beside this one (the job's runtime directory): importable from here."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)


def _root_cause(job_dir: str, hosts: list[str], code: int) -> tuple[str, str]:
    """(host, reason): the runtime's own rule over every host's rank records picks the host whose failure came
    first; its failure file is the reason (else how the step ended)."""
    _runtime_on_path()
    from trainops.runtime.failure import root_cause
    from trainops.runtime.records import read_records
    from trainops.runtime.untrusted import read_text

    bases = {host: os.path.join(job_dir, "hosts", host) for host in hosts}
    cause = root_cause(read_records(os.path.join(base, "output", "ranks") for base in bases.values()), [])
    order = ([cause.host] if cause is not None and cause.host in bases else []) + hosts
    for host in order:
        try:  # the failure file is the job's to write (a FIFO or a huge one there is read bounded, never blocking)
            text = read_text(os.path.join(bases[host], "output", "failure"), 64 * 1024).strip()
        except OSError:
            continue
        if text:
            return host, text[:FAILURE_LIMIT]
    return "", (f"the job step ended with exit code {code} and no host wrote a failure file (a node that could not "
                f"start the runtime: the python option, the shared directory)" + _last_lines(job_dir, hosts))


def _last_lines(job_dir: str, hosts: list[str], count: int = 8) -> str:
    """The last lines the hosts printed, then the batch script's (srun's own errors), for a failure nobody wrote."""
    from trainops.runtime.untrusted import read_tail_bytes

    names = [f"{host}.log" for host in hosts] + [f"batch-{os.environ.get('SLURM_JOB_ID', '')}.log"]
    shown = []
    for name in names:
        try:
            text = read_tail_bytes(os.path.join(job_dir, "logs", name), 4096).decode("utf-8", "replace")
        except OSError:
            continue
        lines = [line for line in text.splitlines() if line.strip()][-count:]
        if lines:
            shown.append(f"--- last lines of {name} ---\n" + "\n".join(lines))
    return ("\n" + "\n".join(shown)) if shown else ""


def finish(job_dir: str, code: int) -> int:
    plan = _load(os.path.join(job_dir, PLAN))
    hosts = list(plan["hosts"])
    ended: dict = {"slurm_job_id": os.environ.get("SLURM_JOB_ID"), "ended": time.time(), "exit_code": code}
    if code == 0:
        first = os.path.join(job_dir, "hosts", hosts[0])
        target = plan["output_dir"]
        try:
            directory = open_output(plan)
            try:
                _pack(os.path.join(first, "model"), directory, "model.tar.gz")
                _pack(os.path.join(first, "output", "data"), directory, "output.tar.gz")
            finally:
                os.close(directory)
            ended.update(status="Completed", model_artifact=os.path.join(target, "model.tar.gz"),
                         output_artifact=os.path.join(target, "output.tar.gz"))
        except OSError as error:
            code = 1
            ended.update(status="Failed", exit_code=code, secondary_status="Uploading",
                         failure_reason=f"could not write the model artifact in {target}: {error}; the model "
                                        f"directory is kept in {first}/model")
    else:
        host, reason = _root_cause(job_dir, hosts, code)
        nodes = dict(zip(hosts, expand_hostlist(os.environ.get("SLURM_JOB_NODELIST", "")), strict=False))
        node = nodes.get(host)
        if node and reason.startswith("health check") and plan.get("hyperpod"):
            reason = (f"{reason}\n(host {host} is Slurm node {node}; HyperPod replaces it once it is marked: sudo "
                      f"scontrol update node={node} state=fail reason=Action:Replace)")
        elif node:
            reason = f"{reason}\n(host {host} ran on Slurm node {node})"
        ended.update(status="Failed", failed_host=host, failed_node=node, failure_reason=reason[:FAILURE_LIMIT])
    _write_ended(job_dir, ended)
    print(f"trainops: job {plan.get('job_name')} {ended['status'].lower()}"
          + (f": {ended.get('failure_reason', '').splitlines()[0]}" if ended["status"] != "Completed" else ""),
          flush=True)
    return code


def slurm_ending(text: str) -> tuple[str, str] | None:
    """(Slurm state, slurmstepd's line) of the last ending slurmstepd wrote in ``text``, the job's line before a
    step's; None when there is none (or it is a requeue, which is no end)."""
    found = list(_SLURM_ENDED.finditer(text))
    found.sort(key=lambda match: match.group(1) == "JOB")
    if not found:
        return None
    match = found[-1]
    state = _DUE_TO.get(match.group(4) or "")
    return (state, match.group(0)) if state else None


def ended_by_slurm(job_dir: str, wait_seconds: float = 2.0) -> int:
    """Write how Slurm ended the job (`slurm_ending` of the batch log) to ``ended.json``, unless the job's own end
    is there; slurmstepd writes its line as it signals, so a line not there yet is looked for ``wait_seconds``."""
    _runtime_on_path()
    from trainops.runtime.untrusted import read_tail_bytes

    path = os.path.join(job_dir, ENDED)
    if os.path.exists(path):
        return 0
    job_id = os.environ.get("SLURM_JOB_ID", "")
    log = os.path.join(job_dir, "logs", f"batch-{job_id}.log")
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            ending = slurm_ending(read_tail_bytes(log, 16 * 1024).decode("utf-8", "replace"))
        except OSError:
            ending = None
        if ending is not None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    state, line = ending or ("FAILED", "the batch script was sent SIGTERM, and Slurm said nothing of ending the job")
    _write_ended(job_dir, {"slurm_job_id": job_id, "ended": time.time(), "slurm_state": state, "slurm_line": line,
                           "nodes": os.environ.get("SLURM_JOB_NODELIST", "")})
    print(f"trainops: Slurm ended job {job_id}: {state} ({line})", flush=True)
    return 0


def _write_ended(job_dir: str, ended: dict) -> None:
    _runtime_on_path()
    from trainops.runtime.records import write_json_atomically

    write_json_atomically(os.path.join(job_dir, ENDED), ended)


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    if command == "free-port":
        print(free_port())
        return 0
    if command == "run" and len(argv) == 3:
        run(argv[2])
        return 1  # not reached: run() became the runtime
    if command == "finish" and len(argv) == 4:
        return finish(argv[2], int(argv[3]) if argv[3].lstrip("-").isdigit() else 1)
    if command == "ended-by-slurm" and len(argv) == 3:
        return ended_by_slurm(argv[2])
    if command == "agent" and len(argv) >= 5:
        agent(argv[2], argv[3], argv[4:])
        return 1  # not reached: agent() became srun
    print("usage: trainops_slurm_node.py free-port | run JOB_DIR | agent JOB_DIR HOST COMMAND... | finish JOB_DIR "
          "CODE | ended-by-slurm JOB_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
