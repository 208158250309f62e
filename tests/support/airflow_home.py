"""A throw-away Airflow home for tests: SQLite in a temporary directory, no examples, the repository's dags/ folder.

Airflow reads ``AIRFLOW_HOME`` once, when ``airflow`` is first imported, and writes ``airflow.cfg`` there. So:

- `isolate_airflow_home()` must run before the first ``import airflow`` of the test process (operator test modules
  call it at their top); it points this process at a temporary home, never at ``~/airflow``;
- the `airflow_home` fixture gives each test module a fresh temporary home holding a migrated database and returns
  the environment that runs Airflow commands, and ``dag.test()`` scripts, against it. DAG runs happen in
  subprocesses: the test process may have imported Airflow already with another home.

``airflow db migrate`` costs about 5 s of CPU (a minute of wall time on a loaded 2-core machine), and a dozen test
modules each want a home of their own. So the run migrates one template database once (`airflow_db_template`: the
first test process to need it migrates, under a lock, in the run's shared temporary directory; the xdist workers
find it done), and each home starts from a copy of it (`copy_migrated_database`, SQLite's backup API: a consistent
copy even of a WAL database). A fresh migration holds no path or key of its home (only Airflow's log templates, the
default pool and the schema version), so a copy is the database `airflow db migrate` would have made there.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS_FOLDER = REPO / "dags"
_MARKER = "TRAINOPS_TEST_AIRFLOW_HOME"


def airflow_environment(home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables that make Airflow use ``home``: its SQLite database, no examples, our DAGs."""
    env = dict(os.environ if base is None else base)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # The local registry and jobs of anything not given a workdir stay in the temporary home too.
        "TRAINOPS_HOME": str(home / "trainops-home"),
        _MARKER: str(home),
    })
    return env


def isolate_airflow_home() -> Path:
    """Point this process's Airflow at a temporary home (idempotent); call before the first ``import airflow``."""
    existing = os.environ.get(_MARKER)
    if existing:
        return Path(existing)
    if "airflow" in sys.modules:
        # Too late to move it; say so instead of silently writing into someone's ~/airflow.
        return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")
    home = Path(tempfile.mkdtemp(prefix="trainops-airflow-unit-"))
    # Airflow's variables only: this process's other settings (TRAINOPS_HOME...) belong to the other tests.
    os.environ.update({key: value for key, value in airflow_environment(home, {}).items()
                       if key.startswith("AIRFLOW") or key == _MARKER})
    return home


@dataclass(frozen=True)
class AirflowHome:
    """A migrated Airflow home: where it is and the environment to run Airflow against it."""

    path: Path
    env: dict[str, str]

    def run(self, *arguments: str, timeout: float = 300, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess:
        """Run ``python <arguments>`` (e.g. ``-m airflow providers list``) against this home; output captured."""
        return subprocess.run([sys.executable, *arguments], env={**self.env, **(env or {})}, cwd=str(REPO),
                              capture_output=True, text=True, timeout=timeout)

    def dag_test(self, dag_file: Path, dag_id: str, conf: dict | None = None,
                 timeout: float = 600, env: dict[str, str] | None = None
                 ) -> tuple[dict | None, subprocess.CompletedProcess]:
        """``dag.test()`` of one DAG in a subprocess against this home: (the outcome, see `dag_test`, or None when
        the subprocess failed; the completed process, for its output). ``env``: more environment variables.

        ``dag.test()`` stores the DAG through its bundle, so a DAG file outside the repository's dags/ runs with its
        own directory as the DAGs folder."""
        import json

        result_file = Path(tempfile.mkstemp(prefix="dag-test-", suffix=".json", dir=self.path)[1])
        folder = Path(dag_file).resolve().parent
        more = {"AIRFLOW__CORE__DAGS_FOLDER": str(folder)} if folder != DAGS_FOLDER else {}
        done = self.run(__file__, str(dag_file), dag_id, json.dumps(conf or {}), str(result_file), timeout=timeout,
                        env={**more, **(env or {})} or None)
        text = result_file.read_text(encoding="utf-8") if result_file.exists() else ""
        return (json.loads(text) if done.returncode == 0 and text else None), done


def migrate(home: Path) -> None:
    """``airflow db migrate`` in ``home`` (a subprocess: this process may have imported Airflow for another home)."""
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=airflow_environment(home),
                          cwd=str(REPO), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def migrated_template(shared: Path) -> Path:
    """The template database under ``shared`` (a directory every test process of this run sees), migrated by the
    first process that asks; a stamp written last means a migration killed midway is redone, never copied."""
    template = shared / "airflow-template"
    template.mkdir(parents=True, exist_ok=True)
    database, stamp = template / "airflow.db", template / ".migrated"
    with open(template / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            database.unlink(missing_ok=True)
            migrate(template)
            stamp.write_text("airflow db migrate done\n")
    return database


def copy_migrated_database(template: Path, home: Path) -> Path:
    """A copy of the migrated ``template`` database as ``home``'s airflow.db (which must not exist yet)."""
    target = home / "airflow.db"
    assert not target.exists(), f"{target} exists: a home gets the template's copy before anything else writes it"
    home.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return target


def shared_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's temporary directory that every xdist worker shares (its own basetemp when not under xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def airflow_db_template(tmp_path_factory) -> Path:
    """A migrated Airflow database to copy (`copy_migrated_database`), made once per test run."""
    return migrated_template(shared_temporary_directory(tmp_path_factory))


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory, airflow_db_template) -> AirflowHome:
    """A fresh Airflow home with a migrated SQLite database, shared by one module's Airflow tests (each module has
    its own: DAG ids, runs and connections of one module never meet another's)."""
    home = tmp_path_factory.mktemp("airflow-home")
    copy_migrated_database(airflow_db_template, home)
    return AirflowHome(home, airflow_environment(home))


def dag_test(dag_file: str, dag_id: str, conf: dict | None = None) -> dict:
    """Run ``dag.test()`` in this process and return ``{"state", "run_id", "tasks": {id: state}, "xcom": {id: {key:
    value}}}``. Used through `AirflowHome.dag_test` (a subprocess with the home's environment)."""
    import runpy

    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    namespace = runpy.run_path(dag_file)
    dag = next(value for value in namespace.values() if getattr(value, "dag_id", None) == dag_id
               and hasattr(value, "test"))
    run = dag.test(run_conf=conf or {})
    with create_session() as session:
        instances = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id,
                                                               TaskInstance.run_id == run.run_id))
        instances = list(instances)
        tasks = {ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state) for ti in instances}
        tries = {ti.task_id: ti.try_number for ti in instances}
        xcom: dict[str, dict] = {}
        for row in session.scalars(select(XComModel).where(XComModel.dag_id == dag_id,
                                                           XComModel.run_id == run.run_id)):
            xcom.setdefault(row.task_id, {})[row.key] = XComModel.deserialize_value(row)
    state = run.state.value if hasattr(run.state, "value") else run.state
    return {"state": str(state), "run_id": run.run_id, "tasks": tasks, "tries": tries, "xcom": xcom}


def _main() -> None:
    import json

    dag_file, dag_id, conf, result_file = sys.argv[1:5]
    outcome = dag_test(dag_file, dag_id, json.loads(conf))
    Path(result_file).write_text(json.dumps(outcome, default=str), encoding="utf-8")


if __name__ == "__main__":
    _main()
