"""How the suite's modules are handed to the xdist workers: a module goes whole to one worker (its module fixtures,
a Slurm cluster or an Airflow home, are set up once), except that the modules of one directory that share a
cluster go whole to one worker together.

The Ray tests (tests/system/ray/) share one real Ray cluster, handed from each of its modules to the next one the
worker runs and stopped when the worker moves on (tests/system/ray/conftest.py): under plain ``--dist loadfile``
each worker that got one of those modules started its own cluster (a head and a worker node, hundreds of MB and
tens of CPU seconds each), so with four workers up to four clusters ran at once. One work unit for the directory
starts one cluster per run, and the worker runs its modules one after another.

Within the order the collection gives (tests/conftest.py hands the modules out longest first), a unit's place is
its first module's.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# Directories whose modules are one work unit: they share a cluster that is costly to start twice.
SHARED_CLUSTER_DIRECTORIES = ("tests/system/ray/",)


def unit_of(nodeid: str) -> str:
    """The work unit a test belongs to: its shared directory when it has one, else its module."""
    module = nodeid.split("::", 1)[0]
    return next((directory for directory in SHARED_CLUSTER_DIRECTORIES if module.startswith(directory)), module)


class ModulesAndSharedDirectories(LoadScopeScheduling):
    """``--dist loadfile``, with the modules of a `SHARED_CLUSTER_DIRECTORIES` entry as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
