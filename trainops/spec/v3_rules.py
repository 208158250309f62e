"""Rules of a job written in the SDK v3's names or using its ``requirements`` (registered into
`trainops.spec.rule_registry.RULES` with the others; the conversion itself is `trainops.spec.v3`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem
from trainops.spec.rule_registry import rule

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec


@rule("sdk", "requirements", "launcher", "source_dir")
def v3_runs_on_the_trainops_launcher(spec: JobSpec) -> Iterator[Problem]:
    """v3's behaviours (its argument encoding, requirements installed first) are the trainops runtime's: the image's
    v2 training toolkit would pass arguments its own way and install only a requirements.txt of its choosing."""
    if spec.launcher == "toolkit":
        if spec.sdk == "v3":
            yield Problem("launcher", "a spec in the SDK v3's names runs on the trainops launcher (v3's argument "
                                      "encoding and requirements are the trainops runtime's): remove launcher: toolkit")
        elif spec.requirements:
            yield Problem("requirements", "is installed by the trainops runtime: use launcher: trainops, or put a "
                                          "requirements.txt in source_dir for the toolkit")
    if spec.requirements and not spec.source_dir:
        yield Problem("requirements", "names a file in source_dir: give source_code.source_dir (source_dir)")


@rule("entry_point", "command", "distribution", "launcher")
def entry_point_or_command(spec: JobSpec) -> Iterator[Problem]:
    """A job runs its entry_point or, SDK v3's way, a shell command: exactly one of them; a command runs as written
    on every host, so no distribution launches it (v3 itself skips its driver then, and says nothing)."""
    if spec.entry_point is None and spec.command is None:
        yield Problem("entry_point", "is required")  # as pydantic says it of any other required field
    elif spec.entry_point is not None and spec.command is not None:
        yield Problem("command", "give entry_point (source_code.entry_script) or command, not both: v3 would run "
                                 "the command and ignore the script")
    if spec.command is not None and spec.dist.type != "none":
        yield Problem("distribution", "a command runs as written on every host, and no launcher starts it: remove "
                                      "distributed and start torchrun or mpirun in the command yourself")
    if spec.command is not None and spec.launcher == "toolkit":
        yield Problem("command", "is run by the trainops runtime (the image's training toolkit runs an entry_point "
                                 "only): remove launcher: toolkit, or give entry_point")
