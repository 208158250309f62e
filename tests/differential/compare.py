"""Compare trainops with the captured oracles (goldens/render.json, goldens/launch.json, launch_tensorflow.json).

Used by the differential tests and runnable on its own for a report
(`.venv/bin/python tests/differential/compare.py`). Each case ends in one of three classes: `agree` (exactly what
the oracle did), `adjudicated` (a deliberate difference listed in ADJUDICATIONS.md, matched by one of the rules in
`adjudications.py`, and after that rule the rest agrees exactly) or `disagree`.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # run as a script: tests/ holds the `differential` package
    sys.path.insert(0, str(HERE.parent))
RENDER_GOLDEN = HERE / "goldens" / "render.json"
LAUNCH_GOLDEN = HERE / "goldens" / "launch.json"
TENSORFLOW_LAUNCH_GOLDEN = HERE / "goldens" / "launch_tensorflow.json"
V3_RENDER_GOLDEN = HERE / "goldens" / "render_v3.json"

#: Request fields the SDK sends that trainops does not render on purpose (ADJUDICATIONS.md, "debugger-hook").
#: ProfilerConfig is compared: trainops sends it as the SDK does.
NOT_RENDERED = ("DebugHookConfig", "DebugRuleConfigurations", "ProfilerRuleConfigurations")


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@dataclass
class Outcome:
    """What one side did with a case: accepted with a request (or launch summary), or refused with a message."""

    accepted: bool
    value: Any = None
    error: str = ""
    problems: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Verdict:
    case_id: str
    kind: str  # agree | adjudicated | disagree
    adjudication: str = ""
    detail: str = ""


# ---------------------------------------------------------------------------------------------------------------
# render


def trainops_render(spec: dict[str, Any], job_name: str) -> Outcome:
    """Parse the case's spec the way a user's YAML reaches trainops, then render it for the toolkit launcher."""
    from pydantic import ValidationError

    from trainops.backends.request.render import render
    from trainops.errors import SpecError
    from trainops.spec.loader import parse_job_spec

    data = {key: value for key, value in spec.items() if value is not None}
    try:
        parsed = parse_job_spec(data)
        request = render(parsed, job_name=job_name, launcher="toolkit")
    except SpecError as error:
        return Outcome(False, error=str(error), problems=[(p.path, p.message) for p in error.problems])
    except ValidationError as error:  # parse_job_spec turns these into SpecError; kept for safety
        return Outcome(False, error=str(error))
    return Outcome(True, value=request)


def comparable_request(request: dict[str, Any]) -> dict[str, Any]:
    """The fields both sides render, with the code location normalised (ADJUDICATIONS.md, "code-location")."""
    shown = copy.deepcopy(request)
    for key in NOT_RENDERED:
        shown.pop(key, None)
    hyperparameters = shown.get("HyperParameters") or {}
    if "sagemaker_submit_directory" in hyperparameters:
        submit = json.loads(hyperparameters["sagemaker_submit_directory"])
        if submit.startswith("s3://") and submit.endswith("/sourcedir.tar.gz"):
            hyperparameters["sagemaker_submit_directory"] = '"<s3 code location>/sourcedir.tar.gz"'
    for channel in shown.get("InputDataConfig") or []:
        # The toolkit's code channel under network isolation: its S3 key is the uploader's choice, like the
        # submit directory ("code-location").
        if channel.get("ChannelName") == "code":
            channel["DataSource"]["S3DataSource"]["S3Uri"] = "<s3 code location>"
            channel.pop("InputMode", None)
    if not shown.get("InputDataConfig"):
        shown.pop("InputDataConfig", None)
    if not shown.get("Environment"):
        shown.pop("Environment", None)
    if not shown.get("Tags"):
        shown.pop("Tags", None)
    return shown


def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """Paths where two JSON values differ, each with both values (short)."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for key in sorted(set(left) | set(right)):
            where = f"{path}.{key}" if path else str(key)
            if key not in left:
                found.append(f"{where}: only trainops has {json.dumps(right[key])[:200]}")
            elif key not in right:
                found.append(f"{where}: only the oracle has {json.dumps(left[key])[:200]}")
            else:
                found += differences(left[key], right[key], where)
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [item for index, (a, b) in enumerate(zip(left, right, strict=True))
                for item in differences(a, b, f"{path}[{index}]")]
    if left != right:
        return [f"{path}: oracle {json.dumps(left)[:200]} != trainops {json.dumps(right)[:200]}"]
    return []


def judge_render(case: dict[str, Any], job_name: str) -> Verdict:
    from differential.adjudications import RENDER_RULES

    sdk = case["sdk"]
    ours = trainops_render(case["spec"], job_name)
    oracle = Outcome(sdk["accepted"], value=sdk.get("request"), error=sdk.get("error", ""))
    for rule in RENDER_RULES:
        if rule.applies(case, oracle, ours):
            oracle, ours = rule.normalise(case, copy.deepcopy(oracle), copy.deepcopy(ours))
            detail = _render_detail(oracle, ours)
            if not detail:
                return Verdict(case["id"], "adjudicated", rule.name)
            return Verdict(case["id"], "disagree", rule.name, detail)
    detail = _render_detail(oracle, ours)
    return Verdict(case["id"], "disagree" if detail else "agree", "", detail)


def _render_detail(oracle: Outcome, ours: Outcome) -> str:
    if oracle.accepted != ours.accepted:
        if oracle.accepted:
            return f"the SDK accepts, trainops refuses: {ours.error[:400]}"
        return f"the SDK refuses ({oracle.error[:300]}), trainops accepts"
    if not oracle.accepted:
        return ""
    return "; ".join(differences(comparable_request(oracle.value), comparable_request(ours.value)))


# ---------------------------------------------------------------------------------------------------------------
# launch


def report(verdicts: list[Verdict]) -> str:
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.kind] = counts.get(verdict.kind, 0) + 1
    lines = [f"{len(verdicts)} cases: " + ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()))]
    by_rule: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.kind == "adjudicated":
            by_rule[verdict.adjudication] = by_rule.get(verdict.adjudication, 0) + 1
    lines += [f"  adjudicated {name}: {count}" for name, count in sorted(by_rule.items())]
    lines += [f"  DISAGREE {v.case_id}: {v.detail}" for v in verdicts if v.kind == "disagree"]
    return "\n".join(lines)


def main() -> None:
    golden = load(RENDER_GOLDEN)
    verdicts = [judge_render(case, golden["job_name"]) for case in golden["cases"]]
    print("render:", report(verdicts))
    if V3_RENDER_GOLDEN.exists():
        from differential.v3_compare import judge_v3

        v3 = load(V3_RENDER_GOLDEN)
        print(f"render (SDK v3 ModelTrainer, {v3['sdk']}):", report([judge_v3(case) for case in v3["cases"]]))
    if LAUNCH_GOLDEN.exists():
        from differential.launch_compare import judge_launch

        launch = load(LAUNCH_GOLDEN)
        verdicts = [judge_launch(case) for case in launch["cases"]]
        print("launch (PyTorch toolkit):", report(verdicts))
        if TENSORFLOW_LAUNCH_GOLDEN.exists():
            launch = load(TENSORFLOW_LAUNCH_GOLDEN)
            verdicts = [judge_launch(case) for case in launch["cases"]]
            print("launch (TensorFlow toolkit):", report(verdicts))


if __name__ == "__main__":
    main()
