"""Compare trainops with the SageMaker SDK v3's ModelTrainer (goldens/render_v3.json, captured by generate_v3.py).

A case is a spec in v3's names; trainops renders it (the trainops launcher, the only one a v3 spec runs on) under the
job name the SDK chose, and the two requests must be the same less each side's driver plumbing: v3's ``code`` and
``sm_drivers`` channels and the ``ContainerEntrypoint`` / ``ContainerArguments`` that start its ``sm_train.sh``;
trainops' ``trainops_code`` / ``trainops_runtime`` channels, its entrypoint, its ``sagemaker_*`` / ``trainops_*``
hyperparameters and the ``PYTHONPATH`` / ``TRAINOPS_*`` variables its runtime reads. The base job name must be the
one v3 picked (its name is ``<base>-<timestamp>``), and a ``SourceCode.command`` the line v3's ``sm_train.sh`` evals. Classes as compare.py's: agree, adjudicated (a rule of
adjudications.py, V3_RULES) or disagree.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from differential.compare import Outcome, Verdict, differences
from trainops.runtime.hyperparameters import COMMAND_KEY

V3_PLUMBING_CHANNELS = ("code", "sm_drivers")
TRAINOPS_PLUMBING_CHANNELS = ("trainops_code", "trainops_runtime")
_TIMESTAMP = re.compile(r"-\d{14}\Z")


def trainops_render_v3(spec: dict[str, Any], job_name: str) -> Outcome:
    from trainops.backends.request.render import render
    from trainops.errors import SpecError
    from trainops.spec.loader import parse_job_spec

    try:
        parsed = parse_job_spec(copy.deepcopy(spec))
        request = render(parsed, job_name=job_name)
    except SpecError as error:
        return Outcome(False, error=str(error), problems=[(p.path, p.message) for p in error.problems])
    return Outcome(True, value={"request": request, "name": parsed.name})


def comparable(request: dict[str, Any], plumbing: tuple[str, ...]) -> dict[str, Any]:
    shown = copy.deepcopy(request)
    algorithm = shown.get("AlgorithmSpecification") or {}
    for key in ("ContainerEntrypoint", "ContainerArguments"):
        algorithm.pop(key, None)
    channels = [channel for channel in shown.get("InputDataConfig") or []
                if channel.get("ChannelName") not in plumbing]
    if channels:
        shown["InputDataConfig"] = channels
    else:
        shown.pop("InputDataConfig", None)
    # mp_parameters: v3's torchrun driver reads SMP's parameters there; trainops' runtime reads them from
    # trainops_distribution (and gives the script SM_HP_MP_PARAMETERS), its own plumbing.
    hyperparameters = {key: value for key, value in (shown.get("HyperParameters") or {}).items()
                       if not key.startswith(("sagemaker_", "trainops_")) and key != "mp_parameters"}
    shown["HyperParameters"] = hyperparameters
    environment = {key: value for key, value in (shown.get("Environment") or {}).items()
                   if key != "PYTHONPATH" and not key.startswith("TRAINOPS_")}
    for key, value in (("Environment", environment), ("HyperParameters", hyperparameters)):
        if value:
            shown[key] = value
        else:
            shown.pop(key, None)
    if not shown.get("Tags"):
        shown.pop("Tags", None)
    return shown


def _detail(case: dict[str, Any], oracle: Outcome, ours: Outcome) -> str:
    if oracle.accepted != ours.accepted:
        if oracle.accepted:
            return f"the SDK accepts, trainops refuses: {ours.error[:400]}"
        return f"the SDK refuses ({oracle.error[:300]}), trainops accepts"
    if not oracle.accepted:
        return ""
    found = differences(comparable(oracle.value, V3_PLUMBING_CHANNELS),
                        comparable(ours.value["request"], TRAINOPS_PLUMBING_CHANNELS))
    command = case["oracle"].get("command")
    if command is not None:
        # v3's command travels in its sm_train.sh, trainops' in a hyperparameter its runtime's shell runs: the same line
        ours_command = json.loads((ours.value["request"].get("HyperParameters") or {}).get(COMMAND_KEY, "null"))
        if ours_command != command:
            found.append(f"command: oracle {command!r} != trainops {ours_command!r}")
    base = _TIMESTAMP.sub("", oracle.value.get("TrainingJobName", ""))
    if ours.value["name"] != base:
        found.append(f"base job name: oracle {base!r} != trainops {ours.value['name']!r}")
    return "; ".join(found)


def judge_v3(case: dict[str, Any]) -> Verdict:
    from differential.adjudications import V3_RULES

    answer = case["oracle"]
    oracle = Outcome(answer["accepted"], value=answer.get("request"), error=answer.get("error", ""))
    name = (oracle.value or {}).get("TrainingJobName") or "v3-job"
    ours = trainops_render_v3(case["spec"], name)
    for rule in V3_RULES:
        if rule.applies(case, oracle, ours):
            oracle, ours = rule.normalise(case, copy.deepcopy(oracle), copy.deepcopy(ours))
            detail = _detail(case, oracle, ours)
            return Verdict(case["id"], "disagree" if detail else "adjudicated", rule.name, detail)
    detail = _detail(case, oracle, ours)
    return Verdict(case["id"], "disagree" if detail else "agree", "", detail)
