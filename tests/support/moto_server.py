"""A moto server on 127.0.0.1 for system tests, plus the few fixes that make its FSx answers look like AWS's.

The server runs in this process (moto's ``ThreadedMotoServer``) on a free port, so tests can also reach into moto's
in-memory state where its API falls short.

What moto 5.2 lacks, and what `patch_fsx_descriptions` adds (checked against moto's ``fsx/models.py``):
``DescribeFileSystems`` answers carry no ``Lifecycle`` and no ``LustreConfiguration.MountName``; real file systems
always have both. The patch reports ``Lifecycle`` from an attribute (default ``AVAILABLE``) and a ``MountName``
derived from the id, and `set_file_system` changes them for one file system. Data repository associations and tasks,
and ``StopTrainingJob``, are not implemented by moto at all: those are tested with botocore's Stubber instead.
"""

from __future__ import annotations

import urllib.request
from typing import Any

from moto.server import ThreadedMotoServer

ACCOUNT_ID = "123456789012"  # moto's default account
REGION = "us-east-1"


class MotoServer:
    """A moto server on 127.0.0.1 and a free port. ``start()`` then ``endpoint``; ``stop()`` at the end."""

    def __init__(self) -> None:
        # Port 0: the kernel picks a free port when the server binds, so there is no window for a clash.
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> MotoServer:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # moto keeps its accounts in this process's memory, not in the server: a new server starts from what earlier
        # servers of the process left (an xdist worker runs many modules, each with a server of its own), so it is
        # reset to an empty account first, as a server a user starts is.
        reset = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(reset, timeout=60):
            pass
        return self

    def stop(self) -> None:
        self._server.stop()


def _file_system_model(file_system_id: str) -> Any:
    from moto.fsx.models import fsx_backends

    return fsx_backends[ACCOUNT_ID][REGION].file_systems[file_system_id]


def patch_fsx_descriptions() -> Any:
    """Make moto's file-system descriptions carry ``Lifecycle`` and ``MountName``; return a function that undoes it."""
    from moto.fsx.models import FileSystem

    original = FileSystem.to_dict

    def to_dict(self: Any) -> dict[str, Any]:
        described = original(self)
        described["Lifecycle"] = getattr(self, "trainops_lifecycle", "AVAILABLE")
        if described.get("FileSystemType") == "LUSTRE":
            lustre = dict(described.get("LustreConfiguration") or {})
            lustre.setdefault("MountName", getattr(self, "trainops_mount_name", self.file_system_id[3:11]))
            described["LustreConfiguration"] = lustre
        return described

    FileSystem.to_dict = to_dict

    def undo() -> None:
        FileSystem.to_dict = original

    return undo


def set_file_system(file_system_id: str, *, lifecycle: str | None = None, mount_name: str | None = None) -> None:
    """Change what moto reports for one file system (its lifecycle, its mount name)."""
    model = _file_system_model(file_system_id)
    if lifecycle is not None:
        model.trainops_lifecycle = lifecycle
    if mount_name is not None:
        model.trainops_mount_name = mount_name


def recording_stop_training_job(stopped: list[str]) -> Any:
    """A StopTrainingJob handler for moto's SageMaker responses (moto has none): the job reads Stopped and its name
    is appended to ``stopped``; tests set it on ``SageMakerResponse.stop_training_job``."""
    from moto.core.responses import EmptyResult
    from moto.sagemaker.models import sagemaker_backends

    def stop_training_job(self: Any) -> Any:
        name = self._get_param("TrainingJobName")
        job = sagemaker_backends[ACCOUNT_ID][REGION].training_jobs[name]
        job.training_job_status, job.secondary_status = "Stopped", "Stopped"
        stopped.append(name)
        return EmptyResult()

    return stop_training_job
