"""Measures every case of the reliability suite (issue 10) and regenerates RELIABILITY.md.

    .venv/bin/python bench/reliability.py                  # every section (a few minutes on 2 cores); rewrites it
    .venv/bin/python bench/reliability.py --only faults --update   # re-measure some sections, their rows replaced
    .venv/bin/python bench/reliability.py --only faults    # some sections (bad-input, fuzz, hostile-data, security,
                                                           # faults, idempotency, load), printed; the file is kept

The scenarios are the ones the tests in tests/reliability/ run (shared helper modules); the tests check the stated
bounds, this script records the figures: time to reject or to end, processes left, data lost, peak memory. Every
bad-input file is rejected in a subprocess of its own, timed after the imports, its memory taken from tracemalloc
(what the rejection allocates) and getrusage (the whole process's peak resident size).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
TESTS = REPOSITORY / "tests" / "reliability"
CORPUS = TESTS / "corpus"
sys.path[:0] = [str(TESTS), str(REPOSITORY / "tests"), str(REPOSITORY / "bench")]

REJECT_SECONDS, REJECT_BYTES = 1.0, 200 * 1024 * 1024

# Run in a subprocess per file: imports first (not part of the time to reject), then the command twice, once timed
# and once under tracemalloc (which slows what it traces), then the process's peak resident size.
CHILD = r'''
import contextlib, io, json, resource, sys, time, tracemalloc
arguments = json.loads(sys.argv[1])
import trainops.cli, trainops.spec, trainops.spec.job, trainops.spec.pipeline, trainops.steps.pipeline
def once():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = trainops.cli.main(arguments)
    return code, out.getvalue(), err.getvalue()
started = time.perf_counter()
code, out, err = once()
seconds = time.perf_counter() - started
tracemalloc.start()
once()
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sys.__stdout__.write(json.dumps({"code": code, "out": out, "err": err, "seconds": seconds, "traced": traced,
                                 "rss": rss}))
'''


def run_child(arguments: list[str], timeout: float = 60) -> dict:
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, "-c", CHILD, json.dumps(arguments)], capture_output=True, text=True,
                               timeout=timeout, cwd=str(REPOSITORY))
    wall = time.perf_counter() - started
    try:
        measured = json.loads(completed.stdout)
    except ValueError:
        measured = {"code": completed.returncode, "out": "", "err": completed.stderr, "seconds": wall, "traced": 0,
                    "rss": 0}
    measured["wall"] = wall
    return measured


# --- 1. bad input ----------------------------------------------------------------------------------------------------

def _check(case: dict, measured: dict, workdir: Path | None) -> list[str]:
    """What is wrong with one rejection (empty when it is right)."""
    wrong = []
    err = measured["err"]
    if measured["code"] != 2:
        wrong.append(f"exit {measured['code']}")
    if "Traceback" in err + measured["out"] or "internal error" in err:
        wrong.append("traceback")
    lines = [line for line in err.splitlines() if line.startswith("  - ")]
    wrong += [f"{field} not named" for field in case.get("fields", [])
              if not any(line.startswith(f"  - {field}: ") for line in lines)]
    wrong += [f"{text!r} missing" for text in case.get("text", []) if text not in err]
    if workdir is not None and workdir.exists() and any(workdir.rglob("*")):
        wrong.append("the pipeline wrote to its workdir")
    return wrong


def measure_case(case: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        workdir = Path(scratch) / "work"
        arguments = [case["command"], str(CORPUS / case["file"])]
        if case["command"] == "run" and case.get("workdir_override", True):
            arguments += ["--workdir", str(workdir)]
        measured = run_child(arguments)
        measured["wrong"] = _check(case, measured, workdir if case["command"] == "run" else None)
    measured.update(file=case["file"], category=case["file"].split("/")[1].split("-")[0])
    del measured["out"], measured["err"]
    return measured


def generated_cases(scratch: Path) -> list[tuple[dict, list[str]]]:
    """Inputs that cannot live in the repository: a file over the size limit, a FIFO, a link to /dev/zero."""
    from trainops.spec.loader import MAX_FILE_BYTES

    huge = scratch / "over-the-size-limit.yaml"
    huge.write_bytes(b"entry_point: train.py\n" + b"#" * MAX_FILE_BYTES)
    fifo = scratch / "fifo.yaml"
    os.mkfifo(fifo)
    zero = scratch / "dev-zero.yaml"
    zero.symlink_to("/dev/zero")
    return [({"file": f"generated/{path.name}", "text": [str(path)]}, ["validate", str(path)])
            for path in (huge, fifo, zero)]


def bad_input() -> dict:
    cases = json.loads((CORPUS / "manifest.json").read_text())["cases"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(measure_case, cases))
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        for case, arguments in generated_cases(Path(scratch)):
            measured = run_child(arguments)
            measured["wrong"] = _check(case, measured, None)
            measured.update(file=case["file"], category="generated")
            del measured["out"], measured["err"]
            results.append(measured)
    return {"results": results}


# --- 1b. fuzzing -----------------------------------------------------------------------------------------------------

def fuzz() -> dict:
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "--hypothesis-show-statistics", str(TESTS / "test_reliability_fuzz.py")],
                               capture_output=True, text=True, timeout=1800, cwd=str(REPOSITORY))
    output = completed.stdout
    tests = []
    for block in output.split("test_reliability_fuzz.py::")[1:]:
        name = block.split(":", 1)[0]
        passing = next((line.strip(" -") for line in block.splitlines() if "passing" in line), "")
        codes = dict((code, share) for share, code in
                     [(line.split("%")[0].strip(" *"), line.split("exit code ")[1].strip())
                      for line in block.splitlines() if "exit code" in line])
        tests.append({"test": name, "examples": passing, "exit_codes": codes})
    return {"passed": completed.returncode == 0, "seconds": round(time.perf_counter() - started, 1),
            "tests": tests}


# --- 2. hostile data -------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def moto_environment():
    import logging

    from support.moto_server import MotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = MotoServer().start()
    saved = dict(os.environ)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL=server.endpoint, AWS_CONFIG_FILE=os.devnull,
                      AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    try:
        yield server.endpoint
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()


def hostile_data() -> dict:
    import boto3
    import hostile_data as data

    from trainops.backends.hostfs.staging import stage_tree

    rows = []
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch, moto_environment():
        root = Path(scratch)
        bucket = f"hostile-{uuid.uuid4().hex[:10]}"
        boto3.client("s3").create_bucket(Bucket=bucket)
        data.put_hostile_objects(bucket)
        (root / "local").mkdir()
        sources = [("S3 (moto server)", f"s3://{bucket}/data", len(data.HOSTILE_KEYS)),
                   ("local tree", str(data.make_hostile_tree(root / "local")), len(data.LOCAL_HOSTILE))]
        for label, source, hostile in sources:
            destination = root / f"staged-{len(rows)}"
            before = data.snapshot(root, destination)
            sentinels = {path: path.exists() for path in data.SENTINELS}
            started = time.perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):
                report = stage_tree(source, str(destination), workers=4)
            seconds = time.perf_counter() - started
            outside = len(data.snapshot(root, destination) ^ before) + sum(
                path.exists() != existed for path, existed in sentinels.items())
            rows.append({"source": label, "hostile": hostile, "reported": len(data.reported(report)),
                         "copied": report.files_copied, "outside": outside, "seconds": round(seconds, 2)})
    return {"rows": rows, "tests": pytest_result("test_reliability_hostile_data.py")}


# --- 3. no shell, no secret leaks -------------------------------------------------------------------------------------

def security() -> dict:
    from no_shell_scan import scan_tree
    from secrets_scenario import hunt

    findings, files = scan_tree(REPOSITORY / "trainops")
    cases = json.loads((CORPUS / "manifest.json").read_text())["cases"]
    mpi_cases = [case["file"] for case in cases if "mpi-options" in case["file"] or "shell-options" in case["file"]]
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        started = time.perf_counter()
        leaks = hunt(Path(scratch))
        leaks["seconds"] = round(time.perf_counter() - started, 1)
    return {"scan_files": files, "scan_findings": [str(item) for item in findings], "mpi_cases": len(mpi_cases),
            "leaks": leaks, "no_shell_tests": pytest_result("test_reliability_no_shell.py"),
            "secret_tests": pytest_result("test_reliability_secrets.py", "test_reliability_masking.py")}


# --- 4. faults ---------------------------------------------------------------------------------------------------------

def faults() -> dict:
    import fault_scenarios as scenarios

    rows = []
    for scenario in scenarios.SCENARIOS + [scenarios.spot_sigterm_then_rerun]:
        with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
            try:
                outcome = scenario(Path(scratch))
            except scenarios.CannotMakeReadOnly as error:
                print(f"[reliability] {scenario.__name__} not run: {error}", file=sys.stderr)
                continue
        for run in outcome if isinstance(outcome, tuple) else (outcome,):
            rows.append({"name": run.name, "returncode": run.returncode, "seconds": run.seconds_to_end,
                         "left_marker": len(run.processes_left), "left_pgrep": len(run.pgrep_left),
                         "status": f"{run.status.get('status')} / {run.status.get('secondary_status')}",
                         "cause": (run.failure.splitlines() or [""])[0], "extra": run.extra, "since": run.since})
    return {"rows": rows}


# --- 5. idempotency --------------------------------------------------------------------------------------------------

def idempotency() -> dict:
    from idempotency_scenario import rerun_after_failed_evaluation

    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        runs = rerun_after_failed_evaluation(Path(scratch))
    rows = [{"run": label, "returncode": run.returncode, "seconds": run.seconds, "trainings": len(run.trainings),
             "reattached": run.train.get("reattached"), "job": run.train.get("job_name")}
            for label, run in runs.items()]
    return {"rows": rows}


# --- 6. load --------------------------------------------------------------------------------------------------------

def load() -> dict:
    from load_scenario import JOBS, submit_at_once

    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        run = submit_at_once(Path(scratch), JOBS)
    durations = [record.get("duration_seconds") or 0 for record in run.statuses.values()]
    return {"jobs": JOBS, "seconds": run.seconds, "completed": sum(code == 0 for code in run.returncodes.values()),
            "correct": sum(model.get("sum") == 3.0 and model.get("job") == name for name, model in run.models.items()),
            "ports": len({model.get("port") for model in run.models.values()}),
            "checkpoint_dirs": len(set(run.checkpoint_dirs.values())), "clashes": len(run.clashes),
            "processes_left": run.processes_left, "longest_job": max(durations), "shortest_job": min(durations)}


def pytest_result(*modules: str) -> dict:
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                *[str(TESTS / module) for module in modules]], capture_output=True, text=True,
                               timeout=1800, cwd=str(REPOSITORY))
    summary = (completed.stdout.strip().splitlines() or [""])[-1]
    return {"passed": completed.returncode == 0, "summary": summary.strip("= "),
            "seconds": round(time.perf_counter() - started, 1)}


# --- RELIABILITY.md ---------------------------------------------------------------------------------------------------

CATEGORIES = {"type": "wrong types", "unknown": "unknown keys", "field": "single-field rules",
              "mpi": "MPI options with shell metacharacters", "rule": "cross-field rules", "sdk": "SDK-form conflicts",
              "smp": "SMP parameters", "hostile": "hostile documents (bombs, nesting, encodings, empty, binary)",
              "pipeline": "pipeline files", "generated": "generated (over 1 MiB, FIFO, /dev/zero)"}

COVERED_BY = {
    "bad": "`test_reliability_corpus.py` (every file), `test_reliability_loader_limits.py`, "
           "`test_reliability_pipeline_preflight.py`",
    "fuzz": "`test_reliability_fuzz.py` (+ `tests/unit/spec/test_loader.py` property tests)",
    "hostile": "`test_reliability_hostile_data.py` (+ `tests/unit/backends/test_local_staging.py`, "
               "`tests/system/test_staging_s3.py`)",
    "shell": "`test_reliability_no_shell.py::test_trainops_never_runs_a_shell`",
    "mpi": "`test_reliability_corpus.py` (`mpi-options-*`), `test_reliability_no_shell.py::test_run_refuses_*`, "
           "`::test_the_runtime_refuses_them_from_toolkit_hyperparameters`",
    "secrets": "`test_reliability_secrets.py`, `test_reliability_masking.py`",
    "idem-pipeline": "`test_reliability_idempotency.py` (+ `tests/system/test_digits_pipeline.py`)",
    "idem-airflow": "`tests/unit/operators/test_operators_training.py::test_a_retry_while_the_job_runs_reattaches_and_"
                    "creates_no_second_job` (stubbed SageMaker), `::test_a_retry_after_the_job_completed_returns_its_"
                    "result_without_waiting`, `::test_local_retry_reattaches_to_the_completed_job_and_a_new_run_trains_"
                    "again`, `tests/system/test_airflow_sagemaker_moto.py::test_a_training_task_uploads_submits_and_a_"
                    "retry_reattaches`",
    "idem-kfp": "`tests/unit/components/test_train_task.py::test_a_rerun_of_the_local_component_reattaches_to_the_"
                "finished_job`, `::test_a_rerun_against_sagemaker_reattaches_instead_of_creating_a_duplicate`, "
                "`tests/system/test_kfp_digits.py::test_a_gate_that_cannot_pass_skips_register_fails_the_run_and_"
                "training_reattaches`",
    "load": "`test_reliability_load.py`",
}
FAULT_TESTS = {
    "a rank exits non-zero": ("30 s", "test_a_rank_that_exits_non_zero_ends_the_job"),
    "a rank is SIGKILLed": ("30 s", "test_a_sigkilled_rank_ends_the_job"),
    "a rank hangs (max_run stops it)": ("max_run + 30 s", "test_a_hung_rank_is_stopped_by_max_run"),
    "the launcher of host 2 is SIGKILLed": ("30 s", "test_a_killed_launcher_of_host_2_ends_the_job"),
    "the whole job is SIGTERMed": ("30 s; re-run loses <= 1 checkpoint interval",
                                   "test_a_sigtermed_job_stops_and_a_rerun_resumes_losing_at_most_one_interval"),
    "re-run after SIGTERM": ("completes from the checkpoint",
                             "test_a_sigtermed_job_stops_and_a_rerun_resumes_losing_at_most_one_interval"),
    "the output path is read-only (from the start)": ("refused before anything runs",
                                                      "test_a_read_only_output_path_refuses_the_job_before_it_runs"),
    "the output path becomes read-only mid-job": (
        "nothing under the final name", "test_an_output_path_made_read_only_mid_job_leaves_nothing_half_written"),
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _mb(count: float) -> str:
    return f"{count / 1024 / 1024:.1f} MB"


def _verdict(ok: bool) -> str:
    return "pass" if ok else "**FAIL**"


def _bad_input_lines(section: dict) -> tuple[list[str], list[str]]:
    """(summary rows, detail lines) of the bad-input corpus."""
    results = section["results"]
    right = [item for item in results if not item["wrong"]]
    slowest = max(results, key=lambda item: item["seconds"])
    traced = max(results, key=lambda item: item["traced"])
    rss = max(results, key=lambda item: item["rss"])
    ok = len(right) == len(results) and slowest["seconds"] <= REJECT_SECONDS and rss["rss"] <= REJECT_BYTES
    summary = [f"| 1 | Bad input: {len(results)} invalid or hostile files | exit 2 with the field named, no traceback: "
               f"{len(right)}/{len(results)}; slowest reject {_ms(slowest['seconds'])} (`{slowest['file']}`); "
               f"largest allocation {_mb(traced['traced'])} (`{traced['file']}`); largest process peak "
               f"{_mb(rss['rss'])} | exit 2, field named, <= 1 s, <= 200 MB | {_verdict(ok)} | {COVERED_BY['bad']} |"]
    detail = ["| category | files | right (exit 2, field named, no traceback) | median reject | slowest reject "
              "| largest allocation (tracemalloc) | largest process peak (RSS) | median command wall time |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, label in CATEGORIES.items():
        group = [item for item in results if item["category"] == key]
        if not group:
            continue
        detail.append(
            f"| {label} | {len(group)} | {sum(not item['wrong'] for item in group)} | "
            f"{_ms(statistics.median(item['seconds'] for item in group))} | "
            f"{_ms(max(item['seconds'] for item in group))} | {_mb(max(item['traced'] for item in group))} | "
            f"{_mb(max(item['rss'] for item in group))} | {statistics.median(item['wall'] for item in group):.2f} s |")
    detail += ["", "The five slowest rejections:", "", "| file | reject | allocation | process peak |",
               "| --- | ---: | ---: | ---: |"]
    for item in sorted(results, key=lambda item: -item["seconds"])[:5]:
        detail.append(f"| `{item['file']}` | {_ms(item['seconds'])} | {_mb(item['traced'])} | {_mb(item['rss'])} |")
    wrong = [item for item in results if item["wrong"]]
    if wrong:
        detail += ["", "Files answered wrongly:", ""] + [f"- `{item['file']}`: {', '.join(item['wrong'])}"
                                                         for item in wrong]
    return summary, detail


def _fuzz_row(section: dict) -> str:
    parts = [f"`{test['test'].split('test_', 1)[1][:60]}`: {test['examples']}; exit codes "
             f"{', '.join(f'{code}: {share}%' for code, share in sorted(test['exit_codes'].items()))}"
             for test in section["tests"]]
    return (f"| 1 | Property-based fuzzing (hypothesis, through the CLI) | {'; '.join(parts)} ({section['seconds']} s) "
            f"| exit 0 or 2 only, the changed field named, a refused pipeline never runs | "
            f"{_verdict(section['passed'])} | {COVERED_BY['fuzz']} |")


def _hostile_rows(section: dict) -> list[str]:
    rows = []
    for row in section["rows"]:
        ok = row["outside"] == 0 and row["reported"] >= row["hostile"] - 1
        rows.append(f"| 2 | Hostile data, {row['source']}: {row['hostile']} hostile names | reported "
                    f"{row['reported']}, good files copied {row['copied']}, paths created or changed outside the "
                    f"destination {row['outside']} ({row['seconds']} s) | each reported, nothing outside | "
                    f"{_verdict(ok)} | {COVERED_BY['hostile']} |")
    tests = section["tests"]
    rows.append(f"| 2 | Hostile data through `trainops stage`, an s3:// job channel, a pipeline stage step | "
                f"{tests['summary']} | each reported, exit 1 (stage) / 2 (job), nothing outside, nothing trained | "
                f"{_verdict(tests['passed'])} | {COVERED_BY['hostile']} |")
    return rows


def _security_rows(section: dict) -> list[str]:
    leaks = section["leaks"]
    found = (leaks["in_console"] + leaks["in_step_result"] + leaks["in_status_and_logs_commands"]
             + len(leaks["files_with_secret"]))
    return [
        f"| 3 | No shell in trainops/ | {section['scan_files']} files scanned, {len(section['scan_findings'])} shell "
        f"uses | none | {_verdict(not section['scan_findings'])} | {COVERED_BY['shell']} |",
        f"| 3 | Custom MPI options with shell metacharacters | {section['mpi_cases']} corpus files refused (exit 2, "
        f"field named); runtime refuses them from toolkit hyperparameters: {section['no_shell_tests']['summary']} | "
        f"refused before any launch | {_verdict(section['no_shell_tests']['passed'])} | {COVERED_BY['mpi']} |",
        f"| 3 | A secret printed and raised by a failing rank | the script saw the value in "
        f"{leaks['script_saw_value']}/2 ranks; occurrences of the value: console {leaks['in_console']}, step result "
        f"(XCom) {leaks['in_step_result']}, `trainops status`/`logs` {leaks['in_status_and_logs_commands']}, files "
        f"{len(leaks['files_with_secret'])} of {leaks['files_checked']} (logs, status, failure files, rank records, "
        f"tails); masked `****` shown {leaks['masked_occurrences']} times ({leaks['seconds']} s); "
        f"{section['secret_tests']['summary']} | 0 everywhere, value reaches the script | "
        f"{_verdict(found == 0 and leaks['script_saw_value'] == 2 and section['secret_tests']['passed'])} | "
        f"{COVERED_BY['secrets']} |",
    ]


def _fault_rows(section: dict) -> list[str]:
    rows = []
    for row in section["rows"]:
        bound, test = FAULT_TESTS.get(row["name"], ("", ""))
        extra = row["extra"]
        lost = "none (nothing ran)" if "from the start" in row["name"] else ""
        if "steps_lost" in extra:
            lost = (f"{extra['steps_lost']} steps (reached {extra['reached_step']}, resumed at "
                    f"{extra['resumed_step']}; checkpoint every {extra['checkpoint_every']})")
        elif "model_kept" in extra:
            lost = (f"none: model directory {'kept' if extra['model_kept'] else 'LOST'}, the output location holds "
                    f"{extra['entries_in_output']}")
        elif "model_steps" in extra:
            lost = f"model trained to {extra['model_steps']} steps"
        when = f"{row['seconds']} s after {row['since']}" + (f" (max_run {extra['max_run']} s)"
                                                              if "max_run" in extra else "")
        ok = row["left_marker"] == 0 and row["left_pgrep"] == 0
        if "max_run" in extra:
            ok = ok and row["seconds"] <= extra["max_run"] + 30
        elif bound == "30 s" or bound.startswith("30 s;"):
            ok = ok and row["seconds"] <= 30
        if "steps_lost" in extra:
            ok = ok and 0 <= extra["steps_lost"] <= extra["checkpoint_every"]
        cause = row["cause"].replace("|", "\\|")[:320]
        rows.append(f"| 4 | {row['name']} | ended {when}; processes left {row['left_marker']} "
                    f"(marker) / {row['left_pgrep']} (pgrep); {row['status']}; failure file: \"{cause}\"; "
                    f"data lost: {lost or 'n/a'} | {bound} | {_verdict(ok)} | "
                    f"`test_reliability_faults.py::{test}` |")
    return rows


def _idempotency_rows(section: dict) -> list[str]:
    parts = [f"{row['run']}: exit {row['returncode']}, trainings so far {row['trainings']}, "
             f"{'re-attached' if row['reattached'] else 'trained'} ({row['seconds']} s)" for row in section["rows"]]
    trainings = [row["trainings"] for row in section["rows"]]
    ok = trainings == [1, 1, 2, 3, 4, 4]
    return [f"| 5 | Pipeline re-run after a failed evaluate | {'; '.join(parts)} | finished training skipped unless "
            f"--force; trained again when data or spec change | {_verdict(ok)} | {COVERED_BY['idem-pipeline']} |",
            f"| 5 | Airflow task retried while its SageMaker job runs | re-attaches, no second job (owned and measured "
            f"by the operators' tests) | no duplicate job | see tests | {COVERED_BY['idem-airflow']} |",
            f"| 5 | KFP component re-run | re-attaches (owned by the components' tests) | no duplicate job | see tests "
            f"| {COVERED_BY['idem-kfp']} |"]


def _load_row(section: dict) -> str:
    ok = (section["completed"] == section["correct"] == section["ports"] == section["checkpoint_dirs"]
          == section["jobs"] and section["clashes"] == 0 and section["processes_left"] == 0)
    return (f"| 6 | {section['jobs']} local jobs (torchrun, 2 ranks, gloo all-reduce) submitted at once | completed "
            f"{section['completed']}/{section['jobs']}, right result {section['correct']}/{section['jobs']}, distinct "
            f"rendezvous ports {section['ports']}, distinct checkpoint directories {section['checkpoint_dirs']}, "
            f"clashes {section['clashes']}, processes left {section['processes_left']}; all done in "
            f"{section['seconds']} s (each job {section['shortest_job']:.1f}-{section['longest_job']:.1f} s) | all "
            f"finish, nothing shared | {_verdict(ok)} | {COVERED_BY['load']} |")


def render(measured: dict, context: dict) -> str:
    """The whole of RELIABILITY.md from the measured sections."""
    rows, details = [], []
    if "bad-input" in measured:
        summary, detail = _bad_input_lines(measured["bad-input"])
        rows += summary
        details += ["## 1. Bad input, by category", "",
                    "Each file is rejected in a subprocess of its own (`trainops validate`, or `trainops run` for "
                    "pipeline files, with `--workdir` in a temporary directory that must stay empty). *Reject* is "
                    "the command's own time after the imports; *allocation* is tracemalloc's peak during the "
                    "rejection; *process peak* is getrusage's maximum resident size of the whole process "
                    "(interpreter, pydantic, trainops); *command wall time* adds the interpreter's start and the "
                    "imports.", ""] + detail + [""]
    if "fuzz" in measured:
        rows.append(_fuzz_row(measured["fuzz"]))
    if "hostile-data" in measured:
        rows += _hostile_rows(measured["hostile-data"])
    if "security" in measured:
        rows += _security_rows(measured["security"])
    if "faults" in measured:
        rows += _fault_rows(measured["faults"])
    if "idempotency" in measured:
        rows += _idempotency_rows(measured["idempotency"])
    if "load" in measured:
        rows.append(_load_row(measured["load"]))
    if "processes" in measured:  # issue 15 items 1-5, issue 16 item 2: tests/reliability/process_scenarios.py
        rows += __import__("process_scenarios").render_rows(measured["processes"])
    if "files" in measured:  # issue 15 items 6-10: tests/reliability/files_scenarios.py
        rows += __import__("files_scenarios").section_rows(measured["files"])
    if "names-secrets-errors" in measured:  # issue 15 items 11-13: tests/reliability/hardening_misc_bench.py
        rows += __import__("hardening_misc_bench").render_rows(measured["names-secrets-errors"])
    if "local-breaks" in measured:  # issue 24's breaks of the local backend: tests/reliability/local_breaks_bench.py
        rows += __import__("local_breaks_bench").render_rows(measured["local-breaks"])
    if "hostile-files" in measured:  # issue 39's attack classes: tests/reliability/hostile_files_bench.py
        rows += __import__("hostile_files_bench").render_rows(measured["hostile-files"])
    if "issue48-misc" in measured:  # issue 48's classes 5, 6, 7, 9: tests/reliability/issue48_misc_bench.py
        rows += __import__("issue48_misc_bench").render_rows(measured["issue48-misc"])
    if "staging-scale" in measured:  # issue 15 item 14: bench/staging_scale.py
        rows.append(__import__("staging_scale").render_row(measured["staging-scale"]))
    header = [
        "# Reliability",
        "",
        "**Regenerated by `.venv/bin/python bench/reliability.py`** (every figure below is measured by that one "
        "command; do not edit this file by hand). The tests in `tests/reliability/` check the same cases against "
        "the stated bounds, with generous margins; this file records what was measured.",
        "",
        f"Last run: {context['started']}, {context['cores']} CPU cores shared with other work (load average "
        f"{context['load']:.1f} at the start, {context['load_end']:.1f} at the end), Python {context['python']}. "
        "Times on a shared machine vary from run to run; the bounds are what the tests hold to.",
        "",
        "| item | case | measured | bound | result | covered by |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    footer = [
        "",
        "## How the fault figures are taken",
        "",
        "Every fault runs a real 2-host job (`trainops run`, torchrun with one rank per simulated host, the stand-in "
        "`tests/reliability/scripts/faulty.py`). *Ended after the fault* is from the moment the fault is injected "
        "(or, for the hang, from the job's start) to the exit of `trainops run`. *Processes left* counts, after the "
        "end, the live processes carrying the job's marker (`trainops.backends.local.processes.job_processes(job_id)`, "
        "the job id read from the status record) and those `pgrep -f` finds by the job directory. The read-only "
        "output path is made with `chattr +i` (root; `chmod` otherwise), which refuses writes even to root "
        "(EPERM, as a read-only disk refuses them with EROFS). The SIGTERM case signals every process of the job "
        "at once, as a spot interruption stops a container; the re-run resumes from the checkpoint the stand-in "
        "writes every 5 steps.",
        "",
        "## Found and fixed while building this suite",
        "",
        "- `trainops/spec/loader.py`: a 5,000-digit integer ended in an internal error (exit 1), now named at its "
        "field; an alias bomb kept under the alias count (48 aliases standing for 531,441 values) was expanded by "
        "the pipeline reader for seconds, now refused while composing by the number of values it stands for; a "
        "self-containing alias (`&h {loop: *h}`) sent the pipeline reader into endless recursion (internal error), "
        "now refused; 30,000 stray keys took about half a minute and a 30,000-line answer, now at most 100 problems "
        "(and a cap of 20,000 values); a 900 KB scalar took seconds in the pure-Python YAML scanner, now libyaml "
        "scans; the JSON duplicate-key check was quadratic; pydantic's union tags leaked into paths "
        "(`steps.evaluate.gate.dict[str,any]`); a symbolic-link loop given as the spec was an internal error.",
        "- `trainops/steps/pipeline.py`: an invalid inline train spec, gate, prepare script or code was found only "
        "after the prepare and stage steps had run, and without its place (`instance_cont`, not "
        "`steps.train.spec.instance_cont`); now the whole file is checked first. The pipeline record "
        "(`last-run.json`) held the spec's secret environment values.",
        "- Secrets (`trainops/runtime/output_relay.py`, `failure.py`, `rank.py`, `trainops/backends/local/job.py`, "
        "`secrets.py`): a token in the spec's `environment` that the script printed or raised with appeared in the "
        "console, the logs, `status.json` (spec and failure reason), both failure files, the rank record, the "
        "stderr tails and the step result; now masked everywhere, the value still reaching the script.",
        "- `trainops/backends/local/job.py`, `artifacts.py`: a read-only output path was found only after the whole "
        "training; now before anything runs, and a failed archive says where the model is kept.",
        "- `trainops/backends/local/job.py`, `locks.py`: 8 jobs of one spec submitted at once shared one checkpoint "
        "directory (7 of 8 started from another job's checkpoint), and two controllers could run one job "
        "directory; now each is locked.",
        "- `trainops/backends/hostfs/inputs.py`: an s3:// channel whose staging refused objects showed a list of "
        "reprs, and only the failed ones when there were failed and refused ones.",
        "",
        "## What these figures do not cover",
        "",
        "- SageMaker itself: secrets in a SageMaker job's CloudWatch logs are masked by the runtime only when the job "
        "carries `TRAINOPS_MASK_VARIABLES` in its environment; the local backend sets it, the SageMaker request "
        "builder does not yet (see the report of issue 10).",
        "- Masking is by value, line by line: a secret shorter than 4 characters, or one printed transformed "
        "(encoded, reversed, split over two lines), is not recognised.",
        "- The registry entry written by `trainops.steps.register` from a spec file stores the spec as read "
        "(environment values included); the pipeline runner passes it the masked spec.",
        "",
    ]
    return "\n".join(header + rows + [""] + details + footer)


SECTIONS = {"bad-input": bad_input, "fuzz": fuzz, "hostile-data": hostile_data, "security": security,
            "faults": faults, "idempotency": idempotency, "load": load,
            "processes": lambda: __import__("process_scenarios").bench_section(),
            "names-secrets-errors": lambda: __import__("hardening_misc_bench").bench_section(),
            "files": lambda: __import__("files_scenarios").measure_section(),
            "staging-scale": lambda: __import__("staging_scale").measure(),
            "local-breaks": lambda: __import__("local_breaks_bench").measure(),
            "hostile-files": lambda: __import__("hostile_files_bench").measure(),
            "issue48-misc": lambda: __import__("issue48_misc_bench").measure()}


def summary_rows(text: str) -> list[str]:
    """The rows of the summary table (the one headed ``| item |``) of a rendered RELIABILITY.md: a section's detail
    tables further down are rows too, and must not be laid into the summary by `--update`."""
    lines = text.split("\n")
    start = next(index for index, line in enumerate(lines) if line.startswith("| item |")) + 2  # past the rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("| "):
            break
        rows.append(line)
    return rows


def update_rows(text: str, rows: list[str]) -> str:
    """RELIABILITY.md ``text`` with ``rows`` in its summary table: a row whose item and case are already there
    replaces that line, a new one goes after the table's last row (`--update`: re-measure some sections only).
    A row whose case was reworded (the section now covers more) replaces the earlier row of its item when the item
    has one row in the table and one among ``rows``: otherwise the stale row would stay beside the new one."""
    lines = text.splitlines()
    first_table_end = next(index for index, line in enumerate(lines) if line.startswith("| item |")) + 1
    while first_table_end + 1 < len(lines) and lines[first_table_end + 1].startswith("| "):
        first_table_end += 1

    def key(line: str) -> tuple[str, str]:
        # A case may carry a count ("Bad input: 344 invalid or hostile files"): a new count is the same row.
        cells = line.split(" | ")
        return cells[0], re.sub(r"\d+", "#", cells[1]) if len(cells) > 1 else ""

    def item(line: str) -> str:
        return line.split(" | ")[0]

    for row in rows:
        found = next((index for index in range(first_table_end + 1) if lines[index].startswith("| ")
                      and key(lines[index]) == key(row)), None)
        same_item = [index for index in range(first_table_end + 1) if lines[index].startswith("| ")
                     and item(lines[index]) == item(row)]
        if found is None and len(same_item) == 1 and [item(other) for other in rows].count(item(row)) == 1:
            found = same_item[0]  # its case reworded: the one earlier row of that item
        if found is not None:
            lines[found] = row
        else:
            first_table_end += 1
            lines.insert(first_table_end, row)
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated sections; prints them and leaves the file")
    parser.add_argument("--update", action="store_true",
                        help="with --only: put the sections' rows into RELIABILITY.md's table (replacing their "
                             "earlier figures) instead of printing them")
    args = parser.parse_args()
    chosen = [name for name in args.only.split(",") if name] or list(SECTIONS)
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    context = {"started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "cores": os.cpu_count(), "load": os.getloadavg()[0], "python": platform.python_version()}
    measured = {}
    for name in chosen:
        started = time.perf_counter()
        print(f"[reliability] {name} ...", file=sys.stderr, flush=True)
        measured[name] = SECTIONS[name]()
        measured[name]["section_seconds"] = round(time.perf_counter() - started, 1)
        print(f"[reliability] {name}: {measured[name]['section_seconds']} s", file=sys.stderr, flush=True)
    context["load_end"] = os.getloadavg()[0]
    if args.only and args.update:
        table = summary_rows(render(measured, context))
        path = REPOSITORY / "RELIABILITY.md"
        text = update_rows(path.read_text(encoding="utf-8"), table)
        note = (f" Sections {', '.join(chosen)} re-measured {context['started']} (load average "
                f"{context['load']:.1f} at the start, {context['load_end']:.1f} at the end).")

        def noted(line: str) -> str:
            # Earlier notes stay (other sections' dates); one for exactly these sections is replaced.
            head, *notes = line.split(" Sections ")
            kept = [f" Sections {earlier}" for earlier in notes
                    if not earlier.startswith(f"{', '.join(chosen)} re-measured ")]
            return head + "".join(kept) + note

        text = "\n".join(noted(line) if line.startswith("Last run:") else line for line in text.split("\n"))
        path.write_text(text, encoding="utf-8")
        print(f"[reliability] RELIABILITY.md: {len(table)} row(s) of {', '.join(chosen)} updated", file=sys.stderr)
        return 0
    if args.only:
        print(json.dumps(measured, indent=1, default=str))
        return 0
    text = render(measured, context)
    (REPOSITORY / "RELIABILITY.md").write_text(text, encoding="utf-8")
    print(f"[reliability] RELIABILITY.md written ({len(text.splitlines())} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
