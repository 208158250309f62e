"""`ClaimsBackend`: a training job is the entry point run on this machine with its channels read from persistent
volume claims: ``pvc://<namespace>/<claim>/<path>`` is ``<root>/claims/<namespace>/<claim>/<path>`` here, as a
cluster would mount the claim. Any other channel value is refused, naming the channel: the engine reads claims only.

A marker file ``<root>/lose-next-node`` makes the next job lose its node before it runs (state ``NodeLost``), once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trainops.backends.kit import Backend, BackendOptions, JobHandle, JobResult, JobStatus, Problem, SpecError
from trainops_claims.vocabulary import CLAIMS

CLAIM = re.compile(r"\Apvc://(?P<namespace>[a-z0-9-]+)/(?P<claim>[a-z0-9-]+)(?:/(?P<path>.*))?\Z")


@dataclass(frozen=True)
class ClaimsOptions(BackendOptions):
    backend: ClassVar[str] = "claims"

    channel_overrides: Mapping[str, str] | None = None
    checkpoint_key: str | None = None
    processes_per_host: int | None = None


class ClaimsBackend(Backend):
    name = "claims"
    Options = ClaimsOptions
    CONTEXT = frozenset({"root"})
    vocabulary = CLAIMS

    def __init__(self, root: str | None = None):
        from trainops.backends.kit import trainops_home

        self.root = Path(root) if root else trainops_home() / "claims"

    def location(self) -> dict[str, str]:
        return {"root": str(self.root)}

    def _job(self, handle: JobHandle | str) -> Path:
        name = handle.job_name if isinstance(handle, JobHandle) else handle
        return self.root / "jobs" / name

    def _mounts(self, spec: Any, options: BackendOptions) -> dict[str, Path]:
        assert isinstance(options, ClaimsOptions)
        given = {name: str(getattr(channel, "s3_data", channel)) for name, channel in spec.channels.items()}
        given.update(options.channel_overrides or {})
        mounts, problems = {}, []
        for name, value in sorted(given.items()):
            found = CLAIM.match(value)
            if not found:
                problems.append(Problem(f"channel_overrides.{name}", f"{value!r} is not a claim: the claims engine "
                                                                     "reads pvc://<namespace>/<claim>/<path>"))
                continue
            mounts[name] = self.root / "claims" / found["namespace"] / found["claim"] / (found["path"] or "")
        if problems:
            raise SpecError(problems, "claims job")
        return mounts

    def dry_run(self, spec: Any, name: str, options: BackendOptions) -> dict[str, Any]:
        mounts = self._mounts(spec, options)
        source = Path(spec.source_dir or ".")
        if not (source / spec.entry_point).is_file():
            raise SpecError(Problem("entry_point", f"{spec.entry_point} is not a file in {source}"), "claims job")
        return {"job_name": name, "entry_point": spec.entry_point, "source_dir": str(source.resolve()),
                "mounts": {key: str(value) for key, value in mounts.items()}}

    def _write(self, job: Path, **record: Any) -> None:
        (job / "status.json").write_text(json.dumps(record))

    def create(self, spec: Any, name: str, options: BackendOptions, *, detached: bool, log: Any) -> JobHandle:
        request = self.dry_run(spec, name, options)
        job = self._job(name)
        job.mkdir(parents=True)
        lose = self.root / "lose-next-node"
        if lose.exists():
            lose.unlink()
            self._write(job, state="NodeLost", states=["Pending", "NodeLost"], failure_reason="node n1 went away")
            return self.handle(name, created=True)
        model = job / "model"
        model.mkdir()
        environment = {**os.environ, "CLAIMS_MODEL_DIR": str(model),
                       **{f"CLAIMS_CHANNEL_{key.upper()}": value for key, value in request["mounts"].items()}}
        with open(job / "output.log", "wb") as output:
            code = subprocess.run([sys.executable, "-u", request["entry_point"]], cwd=request["source_dir"],
                                  stdout=output, stderr=subprocess.STDOUT, env=environment, timeout=120).returncode
        state = "Succeeded" if code == 0 else "Failed"
        self._write(job, state=state, states=["Pending", "Running", state], ended=time.time(),
                    failure_reason=None if code == 0 else f"the script exited with code {code}",
                    model_artifact=str(model) if code == 0 else None)
        return self.handle(name, created=True)

    def status_of(self, name: str) -> JobStatus | None:
        path = self._job(name) / "status.json"
        return CLAIMS.job_status(json.loads(path.read_text())["state"]) if path.exists() else None

    def describe(self, handle: JobHandle) -> JobResult:
        record = json.loads((self._job(handle) / "status.json").read_text())
        return JobResult("claims", handle.job_name, CLAIMS.job_status(record["state"]),
                         secondary_status=record["state"], failure_reason=record.get("failure_reason"),
                         model_artifact=record.get("model_artifact"), reattached=not handle.created,
                         details={"secondary_statuses": record.get("states") or []})

    def wait(self, handle: JobHandle, *, log: Any = None, guards: Any = None) -> JobResult:
        return self.describe(handle)  # a job ends inside create

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        return f"{handle.job_name}: {self.describe(handle).status.value}"

    def logs(self, handle: JobHandle, *, follow: bool = False) -> Iterator[str]:
        yield from self.log_lines(handle)[0]

    def log_lines(self, handle: JobHandle, cursor: Mapping[str, Any] | None = None, *, limit: int = 1000
                  ) -> tuple[list[str], dict[str, Any]]:
        path = self._job(handle) / "output.log"
        lines = path.read_text().splitlines() if path.exists() else []
        start = int((cursor or {}).get("line", 0))
        chosen = lines[start:start + limit]
        return [f"[claims] {line}" for line in chosen], {"line": start + len(chosen)}

    def render_request(self, spec: Any, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.dry_run(spec, job_name, self.options(options))
