"""sbatch's long options, as sbatch itself reads a name: what ``sbatch_options`` may pass on, and what it may not.

sbatch parses its options with getopt_long, which takes any unambiguous prefix of a long option for the option:
``--comm`` is ``--comment``, ``--job`` is ``--job-name``, ``--outp`` is ``--output``. So a name in
``sbatch_options`` is resolved the same way (`resolve`) against every long option sbatch 22.05 has (`SBATCH`: its
``--help`` list and the options it takes without listing them), and the option it resolves to must be one trainops
passes on (`PASSED`); the job is then rendered with that option's full name, which sbatch matches exactly. A name
that resolves to an option trainops sets itself (the job's name, its log, its comment: its record and its
re-attaching depend on them) or has an option of its own for, an ambiguous prefix, or a name sbatch does not have
is refused, naming what sbatch would have taken it for.
"""

from __future__ import annotations

#: Every long option of sbatch (Slurm 22.05).
SBATCH = frozenset({
    "account", "acctg-freq", "array", "batch", "bb", "bbf", "begin", "chdir", "cluster-constraint", "clusters",
    "comment", "constraint", "container", "contiguous", "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu",
    "cpus-per-task", "deadline", "delay-boot", "dependency", "distribution", "error", "exclude", "exclusive",
    "export", "export-file", "extra-node-info", "get-user-env", "gid", "gpu-bind", "gpu-freq", "gpus",
    "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "help", "hint", "hold", "ignore-pbs",
    "input", "job-name", "kill-on-invalid-dep", "licenses", "mail-type", "mail-user", "mcs-label", "mem",
    "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "network", "nice", "no-kill", "no-requeue", "nodefile",
    "nodelist", "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket",
    "open-mode", "output", "overcommit", "oversubscribe", "parsable", "partition", "power", "prefer", "priority",
    "profile", "propagate", "qos", "quiet", "reboot", "requeue", "reservation", "signal", "sockets-per-node",
    "spread-job", "switches", "test-only", "thread-spec", "threads-per-core", "time", "time-min", "tmp", "uid",
    "usage", "use-min-nodes", "verbose", "version", "wait", "wait-all-nodes", "wckey", "wrap",
})
#: The options ``sbatch_options`` passes on, each with a value (``gres: gpu:8``).
PASSED = frozenset({
    "acctg-freq", "begin", "bb", "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu", "cpus-per-task",
    "deadline", "delay-boot", "distribution", "exclude", "export", "extra-node-info", "gpu-bind", "gpu-freq",
    "gpus", "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "hint", "licenses",
    "mail-type", "mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "network",
    "nice", "nodelist", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-socket", "power", "prefer", "priority",
    "profile", "propagate", "sockets-per-node", "switches", "thread-spec", "threads-per-core", "time-min", "tmp",
    "wait-all-nodes", "wckey",
})
#: The options ``sbatch_options`` passes on as flags (the value ``true``; ``false`` leaves the flag out).
FLAGS = frozenset({"contiguous", "no-kill", "overcommit", "oversubscribe", "reboot", "spread-job", "use-min-nodes"})
#: What trainops does instead of the options it sets or has an option for (the rest are refused as not passed on).
OWN = {"job-name": "the job's name is its trainops name", "output": "the batch log is the job's logs/batch-<id>.log",
       "error": "the batch log is the job's logs/batch-<id>.log", "comment": "the comment carries the submission's "
       "token, by which trainops knows its own jobs", "chdir": "the batch script runs in the job's directory",
       "nodes": "instance_count is the number of nodes", "ntasks": "one task per node runs each host",
       "ntasks-per-node": "one task per node runs each host; processes_per_host sets the ranks",
       "time": "max_run is the time limit", "partition": "use the partition option", "account": "use the account "
       "option", "qos": "use the qos option", "reservation": "use the reservation option", "constraint": "use the "
       "constraint option", "exclusive": "use the exclusive option", "requeue": "trainops decides a retry (retry "
       "budgets), so jobs are --no-requeue", "no-requeue": "trainops sets it", "open-mode": "trainops sets it"}


def resolve(name: str) -> tuple[str | None, str | None]:
    """(the option sbatch reads ``name`` as, or None; why it may not be passed on, or None)."""
    name = name.lstrip("-")
    if name in SBATCH:
        option = name
    else:
        matches = sorted(option for option in SBATCH if option.startswith(name))
        if not matches or not name:
            return None, "is not an sbatch option"
        if len(matches) > 1:
            return None, f"is ambiguous: sbatch takes it for none of {', '.join('--' + item for item in matches)}"
        option = matches[0]
    taken = "" if option == name else f"sbatch reads it as --{option}: "
    if option in OWN:
        return option, f"{taken}trainops sets this option itself ({OWN[option]}): leave it out"
    if option not in PASSED and option not in FLAGS:
        return option, (f"{taken}--{option} is not an option trainops passes on (those it does: "
                        f"{', '.join(sorted(PASSED | FLAGS))})")
    return option, None
