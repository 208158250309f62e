"""bench/reliability.py's section for issue 15 items 11-13 (hostile job names, secrets in every output path, clean
errors): runs the scenarios the tests run (names_scenario, output_masking_scenario, clean_errors_scenario) and
renders their rows of RELIABILITY.md.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

COVERED_BY = {
    "names": "`test_reliability_names.py`",
    "secrets": "`test_reliability_output_masking.py`",
    "errors": "`test_reliability_clean_errors.py`, `tests/unit/commands/test_clean_errors.py`",
}


def _airflow_home(root: Path):
    """A migrated throw-away Airflow home (tests/support/airflow_home.py), or None when Airflow cannot migrate."""
    from support.airflow_home import AirflowHome, airflow_environment

    home = root / "airflow-home"
    home.mkdir()
    environment = airflow_environment(home)
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=environment, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        print(f"[reliability] airflow db migrate failed: {done.stderr[-500:]}", file=sys.stderr)
        return None
    return AirflowHome(home, environment)


def bench_section() -> dict:
    import clean_errors_scenario
    import names_scenario
    import output_masking_scenario as masking

    section: dict = {}
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        section["names"] = names_scenario.measure(Path(scratch) / "names")
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        section["errors"] = clean_errors_scenario.measure(Path(scratch) / "errors")
    rows = []
    with tempfile.TemporaryDirectory(prefix="reliability-") as scratch:
        root = Path(scratch)
        rows.append(masking.kfp_compile(root))
        rows.append(masking.kfp_run_local(root))
        home = _airflow_home(root)
        if home is not None:
            rows.append(masking.airflow_prepare(root, home))
    for row in rows:
        row.pop("error", None)
    section["secrets"] = rows
    return section


def _verdict(ok: bool) -> str:
    return "pass" if ok else "**FAIL**"


def render_rows(section: dict) -> list[str]:
    names, errors = section["names"], section["errors"]
    ok = names["refused"] == names["calls"] and names["outside"] == 0 and names["job_dirs"] == 0
    lines = [f"| 11 | Hostile job names (`../x`, `../../x`, an absolute path, `.`, `..`, `;`, a newline, a space) "
             f"through `run`, `status`, `logs`, `stop` | {names['names']} names, {names['calls']} commands: refused "
             f"(exit 2, `job_name` named) {names['refused']}/{names['calls']}; paths created outside $TRAINOPS_HOME "
             f"{names['outside']}, job directories {names['job_dirs']}; slowest refusal "
             f"{names['slowest'] * 1000:.0f} ms | all refused, nothing written | {_verdict(ok)} | "
             f"{COVERED_BY['names']} |"]
    for row in section["secrets"]:
        leaks = row.get("in_output", 0) + row.get("in_console", 0) + len(row.get("files_with_secret", []))
        seen = row.get("digests_seen")
        ok = row["returncode"] == 0 and leaks == 0 and (seen is None or seen == 5)
        where = {"kfp compile": "the compiled YAML and the command's output",
                 "kfp run-local": "the console and every file of the work directory",
                 "airflow prepare": "the prepare task's XComs, every XCom, the task logs and dag.test's console"
                 }.get(row["path"], row["path"])
        lines.append(f"| 12 | Secrets (5 kinds: name, *_KEY, *_PAT, *_CREDS, a URL with user:password@) through "
                     f"`{row['path']}` | occurrences in {where}: {leaks}"
                     + (f"; values the script received: {seen}/5" if seen is not None else "")
                     + f" ({row['seconds']} s) | 0 shown, every value received | {_verdict(ok)} | "
                     f"{COVERED_BY['secrets']} |")
    lines.append(f"| 13 | Clean errors (unknown job without a region, a work directory that is a file or in /proc, "
                 f"`kfp compile -o /`, corrupt status records, a registry that is a file) | {errors['cases']} "
                 f"command lines: exit 2 with the expected message {errors['right']}/{errors['cases']}"
                 + (f" (wrong: {'; '.join(errors['wrong'])})" if errors["wrong"] else "")
                 + f"; slowest {errors['slowest'] * 1000:.0f} ms | exit 2, no traceback | "
                 f"{_verdict(errors['right'] == errors['cases'])} | {COVERED_BY['errors']} |")
    return lines
