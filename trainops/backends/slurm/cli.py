"""``transport: cli``: the Slurm commands of the machine trainops runs on (a login node, or any host with the
cluster's slurm.conf and munge key): ``sbatch`` submits the script file (its ``#SBATCH`` lines are the job's
properties), ``squeue --json`` describes the jobs, ``scancel`` stops one.

``squeue --json`` of Slurm 22.05 prints every job the controller remembers whatever its filters say, so the jobs are
filtered here; when it cannot reach the controller it still exits 0, with an empty list and the error in its
``errors``. A command that cannot reach the controller is `SlurmUnreachable`, a failed look; anything else it
refuses is the job's problem. A job missing from the list is only taken as forgotten once ``scontrol show job``
says Slurm does not know its id ("Invalid job id specified"): an empty answer is never proof.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

from trainops.backends.slurm.transport import SlurmJob, SlurmUnreachable, Transport
from trainops.errors import JobFailed, Problem, SpecError

#: How long one command may take (slurm's own MessageTimeout is 10 s, retried once by the commands).
COMMAND_SECONDS = 60.0
#: What the commands print when the controller is not there to answer (Slurm's own messages).
UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", "Connection refused", "Connection timed out",
               "Communication connection failure", "Zero Bytes were transmitted or received",
               "Slurm backup controller in standby mode", "slurm_load_jobs error: Unexpected message received",
               "Transport endpoint is not connected", "Resource temporarily unavailable", "Protocol authentication")


class CommandTransport(Transport):
    """The Slurm commands found on this machine's PATH (``SLURM_CONF`` and the munge socket as the cluster has
    them)."""

    label = "the Slurm commands (transport cli)"

    def __init__(self, environ: dict[str, str] | None = None):
        self.environ = dict(os.environ if environ is None else environ)

    def _command(self, name: str) -> str:
        found = shutil.which(name, path=self.environ.get("PATH"))
        if found is None:
            raise SpecError(Problem("transport", f"{name} is not on this machine's PATH: run trainops on a login node "
                                                 "of the cluster, or reach slurmrestd with transport: rest"))
        return found

    def _run(self, argv: list[str], what: str) -> str:
        argv = [self._command(argv[0]), *argv[1:]]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env=self.environ, timeout=COMMAND_SECONDS,
                                  check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SlurmUnreachable(f"{what}: {os.path.basename(argv[0])} did not answer within "
                                   f"{COMMAND_SECONDS:.0f} s") from None
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip().splitlines()
            text = "; ".join(message[-3:]) or f"exit code {done.returncode}"
            if any(marker in text for marker in UNREACHABLE):
                raise SlurmUnreachable(f"{what}: {text}")
            raise _refused(what, text)
        return done.stdout

    def submit(self, script: str, script_path: str, job: dict[str, Any]) -> int:
        output = self._run(["sbatch", "--parsable", script_path], "sbatch")
        return int(output.strip().split(";")[0])

    def jobs(self) -> list[SlurmJob]:
        text = self._run(["squeue", "--json"], "squeue")
        try:
            data = json.loads(text)
        except ValueError as error:
            raise SlurmUnreachable(f"squeue --json printed no JSON ({error})") from None
        errors = "; ".join(f"{item.get('error')}: {item.get('description')}" for item in data.get("errors") or []
                           if isinstance(item, dict))
        if errors:
            raise SlurmUnreachable(f"squeue: {errors}")
        return [SlurmJob.from_openapi(item) for item in data.get("jobs") or []]

    def job(self, job_id: int) -> SlurmJob | None:
        found = super().job(job_id)
        if found is not None:
            return found
        try:
            self._run(["scontrol", "show", "job", str(int(job_id))], "scontrol")
        except JobFailed as error:
            if "Invalid job id" in str(error):
                return None  # the controller says it does not know the id: forgotten
            raise SlurmUnreachable(str(error)) from None
        raise SlurmUnreachable(f"squeue did not list job {job_id} but scontrol shows it: looking again")

    def cancel(self, job_id: int) -> None:
        try:
            self._run(["scancel", str(job_id)], "scancel")
        except JobFailed as error:
            if "Invalid job id" not in str(error) and "already completing or completed" not in str(error):
                raise

    def version(self) -> str:
        return self._run(["sbatch", "--version"], "sbatch").strip()


def _refused(what: str, text: str) -> SpecError | JobFailed:
    """Slurm refused the request: bad input (a partition, an account...) when submitting, else a failed call."""
    if what == "sbatch":
        return SpecError(Problem("sbatch", f"Slurm refused the job: {text}; check partition, account, qos, "
                                           "reservation, constraint and sbatch_options"), source="slurm job")
    return JobFailed(f"{what} failed: {text}")

