"""`trainops logs` for local jobs: every host's log, each line prefixed with its host (and rank, from the runtime);
the lines since a cursor, for a poller, are `trainops.backends.hostfs.host_logs.read_new_lines`'s."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TextIO

from trainops.backends.hostfs import paths
from trainops.backends.hostfs.host_logs import shown
from trainops.backends.hostfs.safe_fs import open_regular
from trainops.backends.local import status
from trainops.backends.looks import Looks

#: A longer log line is shown in pieces of this many characters: a rank can write anything in its host's log (a
#: sparse file of zeros with no line end), and no line is ever taken whole into memory.
LINE_LIMIT_CHARS = 64 * 1024


def iter_local_logs(job_name: str, workdir: str | os.PathLike | None = None, *, follow: bool = False,
                    poll_seconds: float = 0.5) -> Iterator[str]:
    """The log lines of a local job, each prefixed with its host; with `follow`, new lines until the job ends."""
    record = status.read(job_name, workdir)  # a clear error when there is no such job
    looks = Looks(f"local job {job_name}", poll_seconds=poll_seconds)
    logs_dir = paths.job_dir(job_name, workdir) / "logs"
    handles: dict[str, TextIO] = {}
    refused: set[str] = set()
    try:
        while True:
            # The status first, then the files: a job that ended before this pass has written all it ever will, so
            # the pass that sees it ended reads its last lines too.
            ended = not follow or record["status"] not in status.ACTIVE
            for path in sorted(logs_dir.glob("algo-*.log")) if logs_dir.is_dir() else []:
                if path.stem not in handles and path.stem not in refused:
                    try:  # a regular file only, opened without blocking (a FIFO or a link there is said, not read)
                        descriptor = open_regular(path)
                    except OSError as error:
                        refused.add(path.stem)
                        yield f"[trainops] {path} cannot be shown: {error.strerror}"
                        continue
                    # Kept open across polls (a follow reads on from where it was); closed in the finally below.
                    handles[path.stem] = open(descriptor, encoding="utf-8", errors="replace")  # noqa: SIM115
            for host, handle in sorted(handles.items()):
                for line in iter(lambda handle=handle: handle.readline(LINE_LIMIT_CHARS), ""):  # type: ignore[misc]
                    yield shown(host, line.rstrip("\n"))
            if ended:
                break
            time.sleep(poll_seconds)
            record = looks.look(lambda: status.read(job_name, workdir))  # a record unreadable for now: again
    finally:
        for handle in handles.values():
            handle.close()


def print_local_logs(job_name: str, workdir: str | os.PathLike | None = None, *, follow: bool = False,
                     poll_seconds: float = 0.5) -> int:
    """Print the logs of a local job; with `follow`, keep printing new lines until the job ends."""
    for line in iter_local_logs(job_name, workdir, follow=follow, poll_seconds=poll_seconds):
        print(line, flush=True)
    return 0
