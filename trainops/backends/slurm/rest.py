"""``transport: rest``: slurmrestd with a JWT, for a worker that is not a node of the cluster (an Airflow worker, a
KFP pod).

The API is pinned to ``v0.0.38`` (Slurm 22.05): its job description is what `SlurmJob.from_openapi` reads, and its
submission takes the job's properties beside the script (slurmrestd does not read ``#SBATCH`` lines). The first call
asks the server for it (``/ping``), so a server of another Slurm release that no longer serves v0.0.38 is named with
the versions it does serve, instead of failing later on a job.

The token is a Slurm JWT (``scontrol token``): the ``SLURM_JWT`` variable or a file (``rest_token_file``), sent with
the user name as ``X-SLURM-USER-NAME`` / ``X-SLURM-USER-TOKEN``. An expired token is refused before any call (its
expiry is in the token). Connection errors, timeouts and 5xx answers that carry no Slurm error are
`SlurmUnreachable` (a failed look); a Slurm error on a look is one too, except "Invalid job id", which means the
controller does not know the job (any more).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import time
import urllib.error
import urllib.request
from typing import Any

from trainops.backends.slurm.options import REST_API
from trainops.backends.slurm.transport import SlurmJob, SlurmUnreachable, Transport
from trainops.errors import JobFailed, Problem, SpecError

REQUEST_SECONDS = 30.0
INVALID_JOB_ID = 2017  # ESLURM_INVALID_JOB_ID
TOKEN_VARIABLE = "SLURM_JWT"
#: The most a token file may hold (a Slurm JWT is a few hundred bytes).
TOKEN_LIMIT = 64 * 1024


def read_token(token_file: str | None, environ: dict[str, str]) -> str:
    """The JWT from ``token_file`` or ``SLURM_JWT`` (``SLURM_JWT=...`` as ``scontrol token`` prints it is fine);
    refused with what to do when there is none or it has expired."""
    if token_file:
        text, where = _token_file(token_file), "rest_token_file"
    else:
        text, where = environ.get(TOKEN_VARIABLE, ""), TOKEN_VARIABLE
    token = text.strip().removeprefix(f"{TOKEN_VARIABLE}=")
    if not token:
        raise SpecError(Problem("rest_token_file", f"no Slurm token: set {TOKEN_VARIABLE} or rest_token_file to a "
                                                   "token from `scontrol token username=USER lifespan=SECONDS`"))
    expires = _expiry(token)
    if expires is not None and expires < time.time():
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expires))
        raise SpecError(Problem(where, f"the Slurm token expired at {when}: make a new one with `scontrol token "
                                       "username=USER lifespan=SECONDS`"))
    return token


def _token_file(token_file: str) -> str:
    """The token file's text: a regular file (a link to one is the user's to make: a secret mounted by Kubernetes is
    a link), opened without waiting (a FIFO there would hold every look past the failed-look bounds) and read for at
    most `TOKEN_LIMIT` bytes."""
    path = os.path.expanduser(token_file)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SpecError(Problem("rest_token_file", f"{token_file}: {error.strerror or error}")) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise SpecError(Problem("rest_token_file", f"{token_file} is {kind}: give a file holding the token from "
                                                       "`scontrol token username=USER lifespan=SECONDS`"))
        raw = os.read(descriptor, TOKEN_LIMIT + 1)
    except OSError as error:
        raise SpecError(Problem("rest_token_file", f"{token_file}: {error.strerror or error}")) from None
    finally:
        os.close(descriptor)
    if len(raw) > TOKEN_LIMIT:
        raise SpecError(Problem("rest_token_file", f"{token_file} is larger than {TOKEN_LIMIT:,} bytes: it should "
                                                   "hold one token"))
    return raw.decode("utf-8", "replace")


def _expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (not verified: slurmctld does that), None when it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None


class RestTransport(Transport):
    """slurmrestd at ``url``, API ``v0.0.38``, as ``user`` with a JWT."""

    label = "slurmrestd (transport rest)"

    def __init__(self, url: str, user: str, token_file: str | None = None, environ: dict[str, str] | None = None):
        self.url = url.rstrip("/")
        self.user = user
        self.token_file = token_file
        self.environ = dict(os.environ if environ is None else environ)
        self._checked = False
        self._release = ""

    # --- the calls --------------------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if not self._checked:
            self._check_api()
        return self._request(method, f"/slurm/{REST_API}{path}", body)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        token = read_token(self.token_file, self.environ)
        request = urllib.request.Request(
            self.url + path, method=method, data=json.dumps(body).encode("utf-8") if body is not None else None,
            headers={"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": token,
                     "Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:  # noqa: S310 - http(s) only
                return _json(response.read(), path)
        except urllib.error.HTTPError as error:
            text = error.read()
            if error.code in (401, 403):
                refused = Problem("rest_token_file", f"slurmrestd refused the token for {self.user} (HTTP "
                                                     f"{error.code}): make a new one with `scontrol token`")
                raise SpecError(refused) from None
            if error.code == 404:
                raise JobFailed(f"slurmrestd at {self.url} has no {path} (HTTP 404)") from None
            try:
                return _json(text, path)  # a Slurm error (HTTP 500 with "errors"): the caller reads it
            except SlurmUnreachable:
                raise SlurmUnreachable(f"slurmrestd at {self.url}: HTTP {error.code} on {path}") from None
        except (urllib.error.URLError, OSError) as error:  # refused, reset, timed out, no route
            reason = getattr(error, "reason", error)
            raise SlurmUnreachable(f"slurmrestd at {self.url} did not answer: {reason}") from None

    def _check_api(self) -> None:
        """Whether the server serves the pinned API: ``/ping`` answers, else say which versions it serves."""
        try:
            answer = self._request("GET", f"/slurm/{REST_API}/ping")
        except JobFailed:
            served = self._served_versions()
            raise SpecError(Problem("rest_url", f"slurmrestd at {self.url} does not serve the Slurm REST API "
                                                f"{REST_API} (Slurm 22.05) that trainops speaks; it serves "
                                                f"{', '.join(served) or 'no version trainops could list'}: run "
                                                f"slurmrestd with -s openapi/{REST_API}")) from None
        release = ((answer.get("meta") or {}).get("Slurm") or {}).get("release")
        self._release = str(release or "")
        errors = _errors(answer)
        if errors:
            raise SlurmUnreachable(f"slurmrestd at {self.url} could not reach the controller: {errors} (an expired "
                                   "or foreign token reads the same: check the token)")
        self._checked = True

    def _served_versions(self) -> list[str]:
        try:
            document = self._request("GET", "/openapi/v3")
        except (JobFailed, SlurmUnreachable):
            return []
        versions = {part for path in document.get("paths") or {} for part in path.split("/")
                    if part.startswith("v0.")}
        return sorted(versions)

    # --- the transport ----------------------------------------------------------------------------------------
    def submit(self, script: str, script_path: str, job: dict[str, Any]) -> int:
        answer = self._call("POST", "/job/submit", {"script": script, "job": job})
        errors = _errors(answer)
        if errors or not isinstance(answer.get("job_id"), int):
            raise SpecError(Problem("sbatch", f"Slurm refused the job through slurmrestd: {errors or answer}; check "
                                              "partition, account, qos, reservation and constraint"),
                            source="slurm job")
        return int(answer["job_id"])

    def jobs(self) -> list[SlurmJob]:
        answer = self._call("GET", "/jobs")
        errors = _errors(answer)
        if errors:
            raise SlurmUnreachable(f"slurmrestd could not list the jobs: {errors}")
        return _described(answer)

    def named(self, user: str, name: str) -> list[SlurmJob]:
        # v0.0.38 lists every user's jobs and filters nothing: each entry is parsed on its own, never trusted
        return [job for job in self.jobs() if job.user == user and job.name == name]

    def job(self, job_id: int) -> SlurmJob | None:
        answer = self._call("GET", f"/job/{int(job_id)}")
        if _error_numbers(answer) == {INVALID_JOB_ID}:
            return None
        errors = _errors(answer)
        if errors:
            raise SlurmUnreachable(f"slurmrestd could not describe job {job_id}: {errors}")
        return next((job for job in _described(answer) if job.job_id == job_id), None)

    def cancel(self, job_id: int) -> None:
        answer = self._call("DELETE", f"/job/{int(job_id)}")
        if _errors(answer) and _error_numbers(answer) != {INVALID_JOB_ID}:
            raise SlurmUnreachable(f"slurmrestd could not cancel job {job_id}: {_errors(answer)}")

    def version(self) -> str:
        if not self._checked:
            self._check_api()
        return self._release


def _described(answer: dict[str, Any]) -> list[SlurmJob]:
    """The answer's jobs; an entry that does not describe a job (no numeric id, not an object) is skipped: it is
    no job of trainops' (slurmrestd lists every user's)."""
    found = []
    for item in answer.get("jobs") or []:
        try:
            found.append(SlurmJob.from_openapi(item))
        except (AttributeError, TypeError, ValueError):
            continue
    return found


def _json(raw: bytes, path: str) -> dict[str, Any]:
    # Another user's job name may hold bytes that are not UTF-8, and slurmrestd passes them on as they are: decoded
    # with replacement, so they can never match a trainops name and never fail the look.
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise SlurmUnreachable(f"slurmrestd answered {path} with something that is not JSON") from None
    if not isinstance(value, dict):
        raise SlurmUnreachable(f"slurmrestd answered {path} with {type(value).__name__}, not an object")
    return value


def _errors(answer: dict[str, Any]) -> str:
    return "; ".join(f"{item.get('error') or 'error'}: {item.get('description') or ''}".strip(": ")
                     for item in answer.get("errors") or [] if isinstance(item, dict))


def _error_numbers(answer: dict[str, Any]) -> set[int]:
    return {int(item["error_number"]) for item in answer.get("errors") or []
            if isinstance(item, dict) and isinstance(item.get("error_number"), int)}
