"""The Airflow names trainops uses, from wherever the installed Airflow keeps them: 3.x (``airflow.sdk``) or 2.11.

Airflow 3 moved what DAG authors and operators import into the Task SDK (``airflow.sdk``); Airflow 2.11 still has
them in ``airflow.models``, ``airflow.exceptions``, ``airflow.decorators``, ``airflow.datasets``. Providers bridge
the two the same way (``apache-airflow-providers-common-compat``); this module is the small part trainops needs, so
the operators, the trigger and the DAG files import from here and run on both. The floor (2.11: the first 2.x the
Amazon provider's current releases support, and the release MWAA environments pass through on their way to 3) is
declared in pyproject's ``airflow`` extra; `AIRFLOW_2` says which side this process is on.

Importing this module imports Airflow's light modules only (it runs when a DAG file is parsed).

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

from typing import Any

from airflow import __version__ as AIRFLOW_VERSION  # noqa: N812

AIRFLOW_2 = AIRFLOW_VERSION.startswith("2.")
#: The oldest Airflow trainops runs on (pyproject's ``airflow`` extra says the same to pip).
MINIMUM = (2, 11)


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


if _release(AIRFLOW_VERSION) < MINIMUM:
    raise ImportError(f"trainops needs Airflow {'.'.join(map(str, MINIMUM))} or later (the Amazon provider's floor "
                      f"too); this is Airflow {AIRFLOW_VERSION}: upgrade Airflow (MWAA: to 2.11, then 3)")

if AIRFLOW_2:
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSkipException,
        TaskDeferred,
    )
    from airflow.models import BaseOperator  # type: ignore[no-redef]
    from airflow.models.baseoperatorlink import BaseOperatorLink  # type: ignore[no-redef]
    from airflow.models.skipmixin import SkipMixin  # type: ignore[no-redef]
else:
    from airflow.sdk import BaseOperator, BaseOperatorLink, SkipMixin  # type: ignore[no-redef]
    from airflow.sdk.exceptions import (  # type: ignore[no-redef]
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSkipException,
        TaskDeferred,
    )

__all__ = ["AIRFLOW_2", "AIRFLOW_VERSION", "AirflowException", "AirflowFailException", "AirflowRescheduleException",
           "AirflowSkipException", "BaseOperator", "BaseOperatorLink", "SkipMixin", "TaskDeferred", "asset",
           "asset_or_time_schedule", "default_deferrable", "delete_variable", "get_variable", "retry_arguments",
           "set_variable"]


def dag_names() -> dict[str, Any]:
    """What a DAG file needs: ``DAG``, ``Param``, ``task``, ``CronTriggerTimetable`` (same names on both sides)."""
    if AIRFLOW_2:  # Airflow 2's names (the type checker sees Airflow 3's modules: the first import is its)
        from airflow import DAG as Dag2
        from airflow.decorators import task as task2  # type: ignore[attr-defined]
        from airflow.models.param import Param as Param2
        from airflow.timetables.trigger import CronTriggerTimetable as Cron2

        return {"DAG": Dag2, "Param": Param2, "task": task2, "CronTriggerTimetable": Cron2}
    from airflow.sdk import DAG, CronTriggerTimetable, Param, task

    return {"DAG": DAG, "Param": Param, "task": task, "CronTriggerTimetable": CronTriggerTimetable}


def __getattr__(name: str) -> Any:
    """``DAG``, ``Param``, ``task`` and ``CronTriggerTimetable`` on first use (PEP 562): only DAG files need them."""
    names = dag_names() if name in ("DAG", "Param", "task", "CronTriggerTimetable") else {}
    if name not in names:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return names[name]


def asset(name: str, uri: str) -> Any:
    """An Airflow 3 ``Asset`` or, on 2.11, the ``Dataset`` of the same URI (2.x datasets have no name)."""
    if AIRFLOW_2:
        from airflow.datasets import Dataset

        return Dataset(uri)
    from airflow.sdk import Asset

    return Asset(name=name, uri=uri)


def asset_or_time_schedule(timetable: Any, assets: Any) -> Any:
    """Run on the timetable or when the assets are updated, whichever comes first (2.11: datasets)."""
    if AIRFLOW_2:
        from airflow.timetables.datasets import DatasetOrTimeSchedule

        return DatasetOrTimeSchedule(timetable=timetable, datasets=assets)
    from airflow.sdk import AssetOrTimeSchedule

    return AssetOrTimeSchedule(timetable=timetable, assets=assets)


def retry_arguments() -> dict[str, Any]:
    """``{"retry_policy": ...}`` where the installed Airflow has retry policies (3.3+), else nothing: for tasks
    that are not trainops operators (a DAG's ``@task``), which get it by themselves."""
    from trainops.operators.retry_policy import retry_policy

    policy = retry_policy()
    return {"retry_policy": policy} if policy is not None else {}


def default_deferrable() -> bool:
    """``[operators] default_deferrable`` of the Airflow configuration (False when unset), as Airflow's own
    operators read it: a deployment with a triggerer turns deferral on for every operator at once."""
    from airflow.configuration import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


def get_variable(key: str, default: Any = None) -> Any:
    """An Airflow Variable's value (None or ``default`` when it is not set), on either side."""
    if AIRFLOW_2:
        from airflow.models import Variable as Variable2

        return Variable2.get(key, default_var=default)
    from airflow.sdk import Variable

    try:
        return Variable.get(key, default=default)
    except Exception:  # noqa: BLE001 - no Variable backend reachable (a unit test): the default
        return default


def set_variable(key: str, value: str) -> None:
    """Set an Airflow Variable (raises when no Variable store is reachable), on either side."""
    if AIRFLOW_2:
        from airflow.models import Variable as Variable2

        Variable2.set(key, value)
        return
    from airflow.sdk import Variable

    Variable.set(key, value)


def delete_variable(key: str) -> None:
    """Delete an Airflow Variable (nothing when it is not set), on either side."""
    if AIRFLOW_2:
        from airflow.models import Variable as Variable2

        Variable2.delete(key)
        return
    from airflow.sdk import Variable

    Variable.delete(key)
