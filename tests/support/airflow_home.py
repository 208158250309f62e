"""A throw-away Airflow home for tests: SQLite in a temporary directory, no examples, the repository's dags/ folder.

Airflow reads ``AIRFLOW_HOME`` once, when ``airflow`` is first imported, and writes ``airflow.cfg`` there. So:

- `isolate_airflow_home()` must run before the first ``import airflow`` of the test process (operator test modules
  call it at their top); it points this process at a temporary home, never at ``~/airflow``;
- the `airflow_home` session fixture migrates a database (``airflow db migrate``, in a subprocess) in a fresh
  temporary home and returns the environment that runs Airflow commands, and ``dag.test()`` scripts, against it.
  DAG runs happen in subprocesses: the test process may have imported Airflow already with another home.
"""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> AirflowHome:
    """A fresh Airflow home with a migrated SQLite database, shared by the session's Airflow system tests."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = airflow_environment(home)
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, cwd=str(REPO),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return AirflowHome(home, env)


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
