"""Issue 39's attack classes, for bench/reliability.py (section `hostile-files`): each class's tests run as pytest runs
them, their outcome and time recorded as RELIABILITY.md rows 39.1-39.7 (the red team's own cases are held out: these
are the project's). The tests hold the promises; this records that they held on this run.
"""

from __future__ import annotations

from local_breaks_bench import measure as measure_breaks
from local_breaks_bench import render_rows

# (item, case, bound, test files or node ids)
CLASSES = [
    ("39.1", "Writing where another user (a real account made with useradd) can write: links planted under the "
             "archives' final names and under the temporary names of 3,000 pids to come, `<job>/output` made a link "
             "to root's 0700 directory, a `<job>` directory of theirs in the output path (the local engine's and the "
             "Slurm node's; the node's host log a link or a FIFO); a registry (and a state root) they made first, "
             "with a planted Approved champion",
     "nothing written through a link (root's 0600 file intact); a link or another user's directory refused before "
     "the job runs; their registry refused for listing and registering (exit 2 naming registry_dir or "
     "TRAINOPS_HOME), their champion never served",
     ["tests/reliability/test_reliability_hostile_writes.py",
      "tests/unit/backends/test_slurm_layout_files.py"]),
    ("39.3", "Identity from the lock that is held: a forged record whose lock file is a hard link to a running "
             "job's lock, then `trainops stop` of it; the controller killed while a host's launcher is stopped "
             "(SIGSTOP: it never ends), then `status` and a re-run of the name; a detached job's supervisor killed "
             "with -9 while a launcher is stopped",
     "the other job is never signalled and completes; the job reads Failed with the reason at once; the re-run runs "
     "(as NAME-2) instead of following it; the detached job reads Failed",
     ["tests/reliability/test_reliability_lock_identity.py"]),
    ("39.4", "This machine's limits: a staging disk out of blocks and one out of inodes (real tmpfs); another user "
             "(useradd) under prlimit --nproc, at validation and in a host that cannot fork, and the controller's "
             "fork refused; a NUL in a hyperparameter; S3 objects grown, deleted and churning at their GetObject; "
             "8 ranks flooding a console read at 80 KB/s; a root rank (plain and in a user namespace) remounting its "
             "read-only channel",
     "exit 2 at validation or a failure saying the limit / the disk / what to do, never 'internal error'; a changed "
     "object copied again, a vanished one reported; every rank's every line in the logs and its last line on the "
     "console; the remounts refused, the data untouched",
     ["tests/reliability/test_reliability_limits.py", "tests/reliability/test_reliability_log_flood.py",
      "tests/reliability/test_reliability_readonly_channels.py",
      "tests/unit/backends/test_local_staging_s3.py::test_an_s3_object_changed_after_listing_is_copied_again_never_"
      "recorded_wrong",
      "tests/unit/backends/test_local_staging_s3.py::test_an_s3_object_deleted_or_grown_while_it_downloads_is_"
      "reported_not_failed"]),
    ("39.5", "No job lost or silently skipped: a second `trainops run` of one spec under a new name; "
             "`--resume-from` an earlier job; a re-run of a failed job's name; `trainops run examples/digits/"
             "train.yaml --no-wait` in an interpreter without boto3 (the make-run venv); a job failing before its "
             "script starts for want of boto3",
     "a new name trains afresh (6 of 6 epochs), resumes only when asked or as its own retry; the --no-wait run "
     "exits 2 naming the channel and pip install 'trainops[aws]', nothing started; the early failure is class "
     "setup with the install hint",
     ["tests/reliability/test_reliability_fresh_start.py",
      "tests/unit/commands/test_clean_errors.py::test_a_command_whose_optional_package_is_missing_says_what_to_"
      "install"]),
    ("39.6", "This machine's cores: each rank of a 2-host local job, with no thread setting, one set in the spec, "
             "one in the machine's environment, and TRAINOPS_LOCAL_THREADS=0 (the speed-up itself: "
             "bench/reliability_threads.py, figures in bench/README.md)",
     "OMP_NUM_THREADS and torch.get_num_threads() = the usable CPUs / ranks on this machine (at least 1); a given "
     "setting left as it is",
     ["tests/reliability/test_reliability_thread_share.py"]),
    ("39.7", "Tests that raced their own processes with a fixed delay, now waiting on a condition: a stop requested "
             "1 s in (the script has started), an orphan reaped after 1.5 s (it has been handed over), a parameter "
             "server checked 1 s in (the launcher's first look at the master), on_kill 1 s in (the script printed), "
             "a job sleeping 4 s while a trigger restarts (it goes on once the trigger follows it); no timed "
             "assertion in the new tests",
     "pass, beside a CPU hog too (the lead's -m system runs x3 record the suite)",
     ["tests/unit/runtime/test_runtime_execute.py::test_request_stop_from_another_thread",
      "tests/unit/runtime/test_runtime_processes.py", "tests/unit/runtime/test_parameter_server.py",
      "tests/unit/operators/test_operators_training.py::test_on_kill_stops_a_running_local_job",
      "tests/unit/operators/test_operators_triggers.py"]),
    ("39.2", "Reading what a job can write: a 512 MiB sparse failure file; a FIFO as the controller lock, the status "
             "record, a host log, the failure file, metrics.json; model archives with a GNU sparse member, a negative "
             "size, hostile modification times, a corrupt header after good members, a truncated gzip, a bomb (the "
             "same as the source tarball the runtime unpacks); metrics of 1e999, NaN, a 400-digit integer",
     "read bounded (process peak < 300 MB), a regular file only, never blocking; each archive refused naming the "
     "member, nothing extracted or dropped; each metric refused by name; no raw Python error",
     ["tests/reliability/test_reliability_hostile_reads.py", "tests/reliability/test_reliability_code_tarball.py"]),
]


def measure() -> dict:
    return measure_breaks(CLASSES)


__all__ = ["CLASSES", "measure", "render_rows"]
