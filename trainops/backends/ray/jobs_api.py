"""The Jobs API as the ray backend uses it: Ray's `JobSubmissionClient`, imported on first use, its errors told
apart (a job that is not there is None; a refused connection or a 5xx answer is a failed look, `LookFailed`).

The client is Ray's own so that ``runtime_env`` with a local ``working_dir`` or ``py_modules`` is uploaded the way
``ray job submit`` does; ``token_file`` adds the bearer header Ray's token authentication (or a proxy) reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainops.backends.kit import LookFailed, Problem, SpecError

#: Ray's answer text for a submission_id it already holds (the job server's 400).
_EXISTS = re.compile(r"already exists", re.IGNORECASE)
_MISSING = re.compile(r"does not exist|not found|status code 404", re.IGNORECASE)
_SERVER = re.compile(r"status code 5\d\d", re.IGNORECASE)


class NameTaken(Exception):
    """The Jobs API already holds a job of this submission_id (another caller submitted it first)."""


def _client_class() -> Any:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as error:
        raise SpecError(Problem("backend", f"the ray backend needs Ray's job client ({error}): pip install "
                                           "'trainops[ray]'")) from error
    return JobSubmissionClient


class JobsApi:
    """One cluster's Jobs API at ``address`` (``http://head:8265``), with a bearer read from ``token_file``."""

    def __init__(self, address: str, token_file: str | None = None):
        self.address = address
        self.token_file = token_file
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            headers = None
            if self.token_file:
                try:
                    token = Path(self.token_file).expanduser().read_text().strip()
                except OSError as error:
                    raise SpecError(Problem("token_file", f"cannot read {self.token_file}: {error}")) from error
                headers = {"Authorization": f"Bearer {token}"}
            try:
                self._client = _client_class()(self.address, headers=headers)
            except ConnectionError as error:
                raise LookFailed(f"the Ray Jobs API at {self.address} did not answer: {error}") from error
            except RuntimeError as error:
                raise _translated(error, self.address) from error
        return self._client

    def info(self, submission_id: str) -> Any | None:
        """The job's details (Ray's `JobDetails`), or None when there is no job of this id."""
        try:
            return self.client().get_job_info(submission_id)
        except RuntimeError as error:
            if _MISSING.search(str(error)):
                return None
            raise _translated(error, self.address) from error

    def submit(self, submission: dict[str, Any]) -> str:
        """Submit; `NameTaken` when the id is held already (the caller looks at whose it is)."""
        try:
            submitted: str = self.client().submit_job(
                entrypoint=submission["entrypoint"], submission_id=submission["submission_id"],
                runtime_env=submission["runtime_env"], metadata=submission["metadata"],
                entrypoint_num_cpus=submission.get("entrypoint_num_cpus"))
            return submitted
        except RuntimeError as error:
            if _EXISTS.search(str(error)):
                raise NameTaken(str(error)) from error
            raise _translated(error, self.address) from error

    def stop(self, submission_id: str) -> bool:
        with self._asking():
            stopped: bool = self.client().stop_job(submission_id)
        return stopped

    def logs(self, submission_id: str) -> str:
        with self._asking():
            text: str = self.client().get_job_logs(submission_id)
        return text

    @contextmanager
    def _asking(self) -> Iterator[None]:
        """A call of the Jobs API whose every error of Ray's is told as trainops' (`_translated`)."""
        try:
            yield
        except RuntimeError as error:
            raise _translated(error, self.address) from error


def _translated(error: RuntimeError, address: str) -> Exception:
    """A 5xx answer or an unreachable server is a failed look; anything else says what Ray answered."""
    text = str(error)
    if _SERVER.search(text) or "Failed to connect" in text or "connection" in text.lower():
        return LookFailed(f"the Ray Jobs API at {address} failed: {text}")
    return SpecError(Problem("ray", f"the Ray Jobs API at {address} answered: {text}"))
