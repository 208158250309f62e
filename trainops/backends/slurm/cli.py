"""``transport: cli``: the Slurm commands of the machine trainops runs on (a login node, or any host with the
cluster's slurm.conf and munge key): ``sbatch`` submits the script file (its ``#SBATCH`` lines are the job's
properties), ``squeue`` looks a job up, ``scancel`` stops one.

trainops looks up its own jobs only: ``squeue --jobs=ID`` for a job whose id it recorded, ``squeue --user=USER
--name=NAME`` for a submission whose id it never recorded (then the token in the comment picks it). It does not use
``squeue --json``: on Slurm 22.05 that prints every job of every user whatever the filters say, and a job name is
whatever bytes its owner chose (not UTF-8, line breaks...), so one other user's job could make every look fail.
What squeue prints is read as bytes, in a fixed format (`FIELDS`), each field followed by the ASCII unit separator
(0x1F, `DELIMITER`); a line that does not split into exactly those fields, or whose id is not a number, is no job of
trainops' (its own names and comments never hold a separator or a line break) and is skipped; text is decoded with
undecodable bytes replaced, so a foreign name can never equal a trainops name.

A command that cannot reach the controller is `SlurmUnreachable`, a failed look; a machine with no Slurm
configuration at all (no slurm.conf, no controller found through DNS), and an sbatch that could connect to no
controller (nothing submitted), are a `SpecError` saying so and what to do;
anything else sbatch refuses is the job's problem. ``SLURM_JWT`` is removed from the commands' environment: this
transport authenticates as the cluster's commands do (munge), a token there is meant for slurmrestd, and sbatch would
hand it to the batch step, where every ``srun`` would try it (and fail) instead of munge. The submitter's
``SBATCH_*`` variables cannot move trainops' options (given on sbatch's command line, `directives`), and those no
option undoes, with the ``SLURM_*`` of an allocation the submitter is in, are left out of sbatch's environment
(`left_out`, docs/slurm.md).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from trainops.backends.slurm.status import current_user
from trainops.backends.slurm.transport import RUNNING_STATES, SlurmJob, SlurmUnreachable, Transport
from trainops.errors import JobFailed, Problem, SpecError

logger = logging.getLogger(__name__)

#: How long one command may take (slurm's own MessageTimeout is 10 s, retried once by the commands).
COMMAND_SECONDS = 60.0
#: What the commands print when the controller is not there to answer (Slurm's own messages).
UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", "Connection refused", "Connection timed out",
               "Communication connection failure", "Zero Bytes were transmitted or received",
               "Slurm backup controller in standby mode", "slurm_load_jobs error: Unexpected message received",
               "Transport endpoint is not connected", "Resource temporarily unavailable", "Protocol authentication")
#: What the commands print on a machine that has no Slurm configuration (no slurm.conf where SLURM_CONF or the
#: default path says, and no controller published in DNS for configless Slurm).
NOT_CONFIGURED = ("Could not establish a configuration source", "Unable to process configuration file",
                  "s_p_parse_file: unable to")
#: Slurm's answer for an id it does not know (any more).
INVALID_JOB_ID = "Invalid job id specified"
#: The fields squeue prints for a job, in order (``--Format``: each followed by `DELIMITER`). The two a user
#: chooses freely (comment and name) come last.
FIELDS = ("JobID", "UserName", "State", "Reason", "NodeList", "BatchHost", "SubmitTime", "StartTime", "EndTime",
          "exit_code", "Comment", "Name")
DELIMITER = b"\x1f"
#: The environment variables the commands never get (see the module docstring).
WITHHELD = ("SLURM_JWT",)
#: sbatch's variables that trainops' options cannot undo and that break its job, never given to sbatch: WAIT (sbatch
#: would block until the job ends), ARRAY_INX (one job would become an array of them), EXPORT and GET_USER_ENV (the
#: batch step's environment, which trainops' srun passes on), ERROR (stderr, with slurmstepd's line that says how
#: Slurm ended the job, away from the batch log trainops reads), INPUT (the batch script's stdin).
WITHHELD_SBATCH = frozenset({"SBATCH_WAIT", "SBATCH_ARRAY_INX", "SBATCH_EXPORT", "SBATCH_GET_USER_ENV",
                             "SBATCH_ERROR", "SBATCH_INPUT"})


@dataclass(frozen=True)
class _Done:
    code: int
    stdout: bytes
    stderr: str

    def message(self) -> str:
        lines = (self.stderr or self.stdout.decode("utf-8", "replace")).strip().splitlines()
        return "; ".join(lines[-3:]) or f"exit code {self.code}"


class CommandTransport(Transport):
    """The Slurm commands found on this machine's PATH (``SLURM_CONF`` and the munge socket as the cluster has
    them)."""

    label = "the Slurm commands (transport cli)"

    def __init__(self, environ: dict[str, str] | None = None, user: str | None = None):
        source = os.environ if environ is None else environ
        self.environ = {key: value for key, value in source.items() if key not in WITHHELD}
        self.user = user
        # squeue's own settings in the environment would change what it prints or filter trainops' job out of a look
        # by id (SQUEUE_PARTITION, SQUEUE_ACCOUNT...): its answer is read in one format, with standard times.
        self._look_environ = {key: value for key, value in self.environ.items() if not key.startswith("SQUEUE_")}
        self._look_environ["SLURM_TIME_FORMAT"] = "standard"
        # sbatch's: without the allocation variables of a job the submitter may be inside (see `submit_environment`).
        self._submit_environ = submit_environment(self.environ)

    def _command(self, name: str) -> str:
        found = shutil.which(name, path=self.environ.get("PATH"))
        if found is None:
            raise SpecError(Problem("transport", f"{name} is not on this machine's PATH: run trainops on a login node "
                                                 "of the cluster, or reach slurmrestd with transport: rest"))
        return found

    def _call(self, argv: list[str], what: str, environ: dict[str, str] | None = None) -> _Done:
        environ = environ if environ is not None else self._look_environ if argv[0] == "squeue" else self.environ
        argv = [self._command(argv[0]), *argv[1:]]
        try:
            done = subprocess.run(argv, capture_output=True, env=environ, timeout=COMMAND_SECONDS, check=False,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SlurmUnreachable(f"{what}: {os.path.basename(argv[0])} did not answer within "
                                   f"{COMMAND_SECONDS:.0f} s") from None
        result = _Done(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"))
        if result.code != 0:
            text = result.message()
            if any(marker in text for marker in NOT_CONFIGURED):
                raise SpecError(_not_configured(what, text, self.environ), source="slurm cluster")
            if any(marker in text for marker in UNREACHABLE):
                raise SlurmUnreachable(f"{what}: {text}")
        return result

    def _run(self, argv: list[str], what: str, environ: dict[str, str] | None = None) -> bytes:
        done = self._call(argv, what, environ)
        if done.code != 0:
            raise _refused(what, done.message())
        return done.stdout

    def submit(self, script: str, script_path: str, job: dict[str, Any]) -> int:
        dropped = sorted(name for name in self.environ if left_out(name))
        if dropped:
            logger.warning("[trainops] slurm: left out of sbatch's environment: %s (they would change the job where "
                           "trainops' options cannot: docs/slurm.md, The submitter's environment)", ", ".join(dropped))
        try:
            output = self._run(["sbatch", "--parsable", *directives(script), script_path], "sbatch",
                               self._submit_environ).decode("utf-8", "replace")
        except SlurmUnreachable as error:
            if "connect failure" not in str(error):
                raise  # it may have reached the controller: the record stays, a look finds the job by its token
            # No connection was made to any controller: nothing was submitted, and the cause is the cluster's.
            where = self.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
            raise SpecError(Problem("transport", f"no Slurm controller answered ({error}); nothing was submitted: "
                                                 f"check that the cluster is up (`scontrol ping`) and that {where} "
                                                 "is its slurm.conf, or reach its slurmrestd with -o transport=rest "
                                                 "-o rest_url=http://HOST:6820"), source="slurm cluster") from None
        try:
            return int(output.strip().split(";")[0])
        except ValueError:
            raise JobFailed(f"sbatch printed no job id ({output.strip()[:200]!r})") from None

    def _squeue(self, *filters: str) -> list[SlurmJob]:
        text = self._run(["squeue", "--noheader", "--states=all", *filters,
                          "--Format=" + ",".join(f"{field}:{DELIMITER.decode()}" for field in FIELDS)], "squeue")
        return [job for line in text.split(b"\n") if (job := parse_line(line)) is not None]

    def jobs(self) -> list[SlurmJob]:
        return self._squeue(f"--user={self.user or current_user()}")

    def named(self, user: str, name: str) -> list[SlurmJob]:
        return [job for job in self._squeue(f"--user={user}", f"--name={name}")
                if job.user == user and job.name == name]

    def job(self, job_id: int) -> SlurmJob | None:
        done = self._call(["squeue", "--noheader", "--states=all", f"--jobs={int(job_id)}",
                           "--Format=" + ",".join(f"{field}:{DELIMITER.decode()}" for field in FIELDS)], "squeue")
        if done.code != 0:
            if INVALID_JOB_ID in done.message():
                return None  # the controller says it does not know the id: forgotten
            raise SlurmUnreachable(f"squeue: {done.message()}")
        lines = [line for line in done.stdout.split(b"\n") if line.strip()]
        found = [job for line in lines if (job := parse_line(line)) is not None and job.job_id == job_id]
        if found:
            return found[0]
        if lines:  # a job holds the id whose fields trainops cannot read: never one of trainops' own
            return SlurmJob(job_id=job_id, name="", user="", state="", comment="")
        raise SlurmUnreachable(f"squeue printed nothing for job {job_id}: looking again")

    def cancel(self, job_id: int) -> None:
        done = self._call(["scancel", str(int(job_id))], "scancel")
        text = done.message()
        if done.code != 0 and INVALID_JOB_ID not in text and "already completing or completed" not in text:
            raise _refused("scancel", text)

    def version(self) -> str:
        return self._run(["sbatch", "--version"], "sbatch").decode("utf-8", "replace").strip()


def directives(script: str) -> list[str]:
    """The script's ``#SBATCH`` options as sbatch's own arguments. sbatch lets its ``SBATCH_*`` environment variables
    override the script's ``#SBATCH`` lines but not its command line: given there too, trainops' options (the job's
    name, comment, time limit, log, directory, the settings' partition, account... and ``sbatch_options``) hold
    whatever the submitter's environment says, while an ``SBATCH_*`` variable for an option trainops does not set
    (``SBATCH_PARTITION`` without ``-o partition``) still applies, as sbatch documents."""
    found = []
    for line in script.splitlines()[1:]:
        if not line.startswith("#SBATCH "):
            break  # batch_script writes them together, after the shebang, as sbatch reads them
        found.append(line[len("#SBATCH "):])
    return found


def submit_environment(environ: dict[str, str]) -> dict[str, str]:
    """sbatch's environment: the submitter's, without what would change trainops' job where its own options cannot
    (`left_out`)."""
    return {key: value for key, value in environ.items() if not left_out(key)}


def left_out(name: str) -> bool:
    """Whether sbatch is not given the variable ``name`` of the submitter's environment:

    - ``SLURM_*`` but ``SLURM_CONF``: the variables of a Slurm job the submitter runs inside (an ``salloc`` shell, an
      Airflow worker that is itself a Slurm job). sbatch hands its environment to the batch step, where trainops'
      ``srun`` would take them as its own options (``SLURM_CPUS_PER_TASK``, ``SLURM_MEM_PER_CPU``,
      ``SLURM_DISTRIBUTION``, ``SLURM_CPU_BIND``...: a step that asks for more than the job has, or ranks placed
      otherwise); Slurm sets the new job's own.
    - `WITHHELD_SBATCH`: sbatch's own variables that no option on its command line undoes and that break what
      trainops relies on (see there). Every other ``SBATCH_*`` variable applies to what trainops does not set, as
      sbatch documents (`directives`).
    """
    return (name.startswith("SLURM_") and name != "SLURM_CONF") or name in WITHHELD_SBATCH


def parse_line(line: bytes) -> SlurmJob | None:
    """One line of `FIELDS` as squeue prints them, or None when it is not one (see the module docstring)."""
    parts = line.split(DELIMITER)
    if len(parts) != len(FIELDS) + 1 or parts[-1].strip() or not parts[0].strip().isdigit():
        return None
    values = dict(zip(FIELDS, (part.decode("utf-8", "replace").strip() for part in parts), strict=False))
    state = (values["State"].split() or [""])[0]
    code = values["exit_code"]
    return SlurmJob(job_id=int(values["JobID"]), name=values["Name"], user=values["UserName"], state=state,
                    reason=_absent(values["Reason"]), nodes=_absent(values["NodeList"]),
                    comment=_absent(values["Comment"]), submitted=_time(values["SubmitTime"]),
                    started=_time(values["StartTime"]),
                    ended=_time(values["EndTime"]) if state not in RUNNING_STATES else None,
                    exit_code=int(code) if code.isdigit() else None, batch_host=_absent(values["BatchHost"]))


def _absent(text: str) -> str:
    return "" if text in ("(null)", "N/A", "None") else text


def _time(text: str) -> float | None:
    """squeue's local time (``2026-12-07T02:59:27``) in seconds since the epoch; None for N/A, Unknown, None."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def _not_configured(what: str, text: str, environ: dict[str, str]) -> Problem:
    configured = environ.get("SLURM_CONF")
    where = f"SLURM_CONF={configured}" if configured else "no SLURM_CONF, no /etc/slurm/slurm.conf"
    return Problem("transport", f"no Slurm cluster is configured on this machine ({where}; {what} said: {text}): "
                                "run trainops on a login node of the cluster, set SLURM_CONF to the cluster's "
                                "slurm.conf, or reach the cluster's slurmrestd with -o transport=rest -o "
                                "rest_url=http://HOST:6820")


def _refused(what: str, text: str) -> SpecError | JobFailed:
    """Slurm refused the request: bad input (a partition, an account...) when submitting, else a failed call."""
    if what == "sbatch":
        return SpecError(Problem("sbatch", f"Slurm refused the job: {text}; check partition, account, qos, "
                                           "reservation, constraint and sbatch_options"), source="slurm job")
    return JobFailed(f"{what} failed: {text}")
