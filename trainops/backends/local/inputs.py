"""Where a local job's channels and code come from on this machine.

Local paths and file:// URIs are used in place; s3:// channels are staged into the job directory first (boto3,
honouring AWS_ENDPOINT_URL); file-system channels (FSx, EFS) cannot be mounted here and must be mapped to a local
directory, which `--channel NAME=PATH` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from trainops.errors import Problem, SpecError
from trainops.spec.inputs import FileSystemInput, local_path
from trainops.spec.job import JobSpec


def resolve_channels(spec: JobSpec, job_dir: Path, overrides: dict[str, str],
                     log: Callable[[str], None]) -> dict[str, Path]:
    """channel name -> local directory with its data; every problem is reported at once."""
    unknown = sorted(set(overrides) - set(spec.channels))
    problems = [Problem(f"channel {name}", f"is not a channel of the spec (channels: {sorted(spec.channels)})")
                for name in unknown]
    resolved: dict[str, Path] = {}
    for name, channel in spec.channels.items():
        if name in overrides:
            source = overrides[name]
        elif isinstance(channel, FileSystemInput):
            problems.append(Problem(f"inputs.{name}", f"reads {channel.file_system_type} {channel.file_system_id}, "
                                                      "which cannot be mounted here: map it to a local directory "
                                                      f"with --channel {name}=PATH"))
            continue
        else:
            source = channel.s3_data
        if source.startswith("s3://"):
            destination = job_dir / "data" / name
            log(f"[trainops] staging channel {name} from {source}")
            from trainops.backends.local.staging import stage_tree

            report = stage_tree(source, str(destination), progress=False)
            problem = _staging_problem(source, list(report.refused) + list(report.failed))
            if problem:
                problems.append(Problem(f"inputs.{name}", problem))
            resolved[name] = destination
            continue
        path = Path(local_path(source)).expanduser().resolve()
        if not path.exists():
            problems.append(Problem(f"inputs.{name}", f"{path} does not exist: stage the data first (trainops stage)"))
            continue
        resolved[name] = path if path.is_dir() else _single_file_channel(job_dir, name, path)
    if problems:
        raise SpecError(problems, "channels of the local job")
    return resolved


def _staging_problem(source: str, items: list, shown: int = 10) -> str | None:
    """Every object staging refused or could not copy, one `name: reason` each (names escaped: a key may hold a
    newline or a terminal escape), the first `shown` of them."""
    if not items:
        return None
    from trainops.backends.local.stage_names import printable_name

    listed = "; ".join(f"{printable_name(item.name)}: {item.reason}" for item in items[:shown])
    more = f"; and {len(items) - shown} more" if len(items) > shown else ""
    return f"staging {source} refused or failed {len(items)} object(s): {listed}{more}"


def _single_file_channel(job_dir: Path, name: str, path: Path) -> Path:
    # A channel is a directory in the container, even when its S3 prefix names one object.
    directory = job_dir / "data" / name
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / path.name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(path)
    return directory


def resolve_code_dir(spec: JobSpec) -> Path:
    """The directory holding the training code (source_dir, else the entry point's directory)."""
    if spec.source_dir:
        if spec.source_dir.startswith("s3://"):
            raise SpecError(Problem("source_dir", "an s3:// code location cannot run locally: give a local directory"))
        directory = Path(local_path(spec.source_dir)).expanduser().resolve()
    else:
        directory = Path.cwd()
    if not directory.is_dir():
        raise SpecError(Problem("source_dir", f"{directory} is not a directory"))
    if not (directory / spec.entry_point).is_file():
        raise SpecError(Problem("entry_point", f"{spec.entry_point} is not a file in {directory}"))
    return directory
