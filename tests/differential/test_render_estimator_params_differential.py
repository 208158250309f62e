"""The estimator options of issue 25 (training plan, infra check, placement, no compression, TensorBoard, private
registries, model channel, code location, ...) rendered by trainops (`--launcher toolkit`) against the SageMaker
Python SDK v2's requests, alone, together and with every distribution.

The SDK's answers are in goldens/render_estimator_params.json and its signatures in goldens/estimator_signature.json,
both captured by generate_estimator_params.py in the oracle venv (README.md); this test never needs the SDK. Every
case agrees exactly, or differs as one of the two adjudications below says.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from differential.compare import HERE, NOT_RENDERED, Outcome, differences, load, trainops_render

GOLDEN = load(HERE / "goldens" / "render_estimator_params.json")
SIGNATURES = load(HERE / "goldens" / "estimator_signature.json")
SPEC_MD = HERE.parents[1] / "docs" / "spec.md"

#: Deliberate differences, each with the AWS documentation that decides it.
ADJUDICATED = {
    # The SDK drops the credentials silently when no access mode is set; the API reads
    # TrainingRepositoryAuthConfig only for images in a private registry, i.e. TrainingRepositoryAccessMode Vpc
    # (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_TrainingImageConfig.html). trainops refuses
    # instead of sending a job that would not use the credentials the user gave.
    "option-registry-credentials-without-mode": r"^training_repository_credentials_provider_arn: is used only for an "
                                                r"image in a private registry",
}


def comparable(request: dict, spec: dict) -> dict:
    """The fields both sides render. DebugHookConfig is left out as in the main grid ("debugger-hook"); ProfilerConfig
    is compared, on or off. The code location is compared exactly when the spec sets code_location; otherwise it is
    the uploader's choice."""
    shown = copy.deepcopy(request)
    for key in NOT_RENDERED:
        shown.pop(key, None)
    hyperparameters = shown.get("HyperParameters") or {}
    submit = json.loads(hyperparameters.get("sagemaker_submit_directory", "null"))
    if not spec.get("code_location") and isinstance(submit, str) and submit.startswith("s3://"):
        hyperparameters["sagemaker_submit_directory"] = '"<s3 code location>/sourcedir.tar.gz"'
    for channel in shown.get("InputDataConfig") or []:
        if channel.get("ChannelName") == "code":  # the toolkit's code channel: a prefix or the tarball object
            uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
            location = spec.get("code_location")
            channel["DataSource"]["S3DataSource"]["S3Uri"] = (
                "<code_location>" if location and uri.startswith(f"{location}/oracle-job-1/source/")
                else "<s3 code location>")
            channel.pop("InputMode", None)
    for key in ("InputDataConfig", "Environment", "Tags"):
        if not shown.get(key):
            shown.pop(key, None)
    return shown


def verdict(case: dict) -> tuple[str, str]:
    """('agree' | 'adjudicated' | 'disagree', detail)."""
    sdk = case["sdk"]
    ours = trainops_render(case["spec"], GOLDEN["job_name"])
    oracle = Outcome(sdk["accepted"], value=sdk.get("request"), error=sdk.get("error", ""))
    pattern = ADJUDICATED.get(case["id"])
    if pattern is not None:
        refused_as_said = (oracle.accepted and not ours.accepted and len(ours.problems) == 1
                           and re.search(pattern, ": ".join(ours.problems[0])) is not None)
        return ("adjudicated" if refused_as_said else "disagree"), ours.error
    if oracle.accepted != ours.accepted:
        return "disagree", (f"the SDK accepts, trainops refuses: {ours.error[:400]}" if oracle.accepted
                            else f"the SDK refuses ({oracle.error[:300]}), trainops accepts")
    if not oracle.accepted:
        return "agree", ""
    found = differences(comparable(oracle.value, case["spec"]), comparable(ours.value, case["spec"]))
    return ("disagree" if found else "agree"), "; ".join(found)


def _case(case_id: str) -> dict:
    return next(case for case in GOLDEN["cases"] if case["id"] == case_id)


def test_the_grid_covers_every_option_alone_together_and_with_every_distribution():
    ids = [case["id"] for case in GOLDEN["cases"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 250
    assert GOLDEN["versions"]["sagemaker"] == "2.257.7"
    distributions = {case_id.split("-")[1] for case_id in ids if case_id.startswith("together-")} - {"p5"}
    assert len(distributions) == 19
    options = {"training_plan", "enable_infra_check", "instance_placement_config", "disable_output_compression",
               "tensorboard_output_config", "container_entry_point", "container_arguments",
               "training_repository_access_mode", "training_repository_credentials_provider_arn",
               "enable_remote_debug", "enable_session_tag_chaining", "disable_profiler", "container_log_level",
               "model_uri", "model_channel_name", "code_location", "dependencies"}
    set_by_cases = {key for case in GOLDEN["cases"] if case["id"].startswith("option-") for key in case["spec"]}
    assert options <= set_by_cases


def test_every_case_agrees_with_the_sdk_or_is_adjudicated():
    verdicts = {case["id"]: verdict(case) for case in GOLDEN["cases"]}
    disagreements = {case_id: detail for case_id, (kind, detail) in verdicts.items() if kind == "disagree"}
    assert not disagreements, "\n".join(f"{key}: {value}" for key, value in disagreements.items())
    adjudicated = sorted(case_id for case_id, (kind, _) in verdicts.items() if kind == "adjudicated")
    assert adjudicated == sorted(ADJUDICATED)
    accepted = [case for case in GOLDEN["cases"] if case["sdk"]["accepted"]]
    assert len(accepted) >= 200  # the comparison covers requests, not only refusals


@pytest.mark.parametrize("case_id", ["together", "everything", "together-p5", "together-smddp", "together-mpi",
                                     "together-pytorchddp", "together-torch_distributed", "together-mwms"])
def test_the_done_when_spec_agrees_exactly_and_passes_botocore_validation(case_id):
    """The issue's spec (training plan, infra check, placement, no compression, TensorBoard, private registry)
    renders the SDK's request, and botocore's own parameter validation accepts it as CreateTrainingJob input."""
    import botocore.session
    from botocore.validate import ParamValidator

    case = _case(case_id)
    kind, detail = verdict(case)
    assert kind == "agree", detail
    ours = trainops_render(case["spec"], GOLDEN["job_name"])
    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(ours.value, model.operation_model("CreateTrainingJob").input_shape)
    assert not report.has_errors(), report.generate_report()
    request = ours.value
    assert request["ResourceConfig"]["TrainingPlanArn"].endswith(":training-plan/p5-reserved-plan")
    assert request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert request["OutputDataConfig"]["CompressionType"] == "NONE"
    assert request["AlgorithmSpecification"]["TrainingImageConfig"]["TrainingRepositoryAccessMode"] == "Vpc"
    assert request["TensorBoardOutputConfig"]["S3OutputPath"] == "s3://trainops-oracle-out/tensorboard"
    assert request["ResourceConfig"]["InstancePlacementConfig"]["PlacementSpecifications"][0]["InstanceCount"] == 2


def test_the_code_location_moves_the_code_exactly_as_the_sdk_does():
    ours = trainops_render(_case("option-code-location")["spec"], GOLDEN["job_name"])
    assert json.loads(ours.value["HyperParameters"]["sagemaker_submit_directory"]) == \
        "s3://trainops-oracle-code/prefix/oracle-job-1/source/sourcedir.tar.gz"
    assert verdict(_case("option-code-location")) == ("agree", "")


def test_both_refuse_a_model_channel_named_like_a_data_channel_and_a_local_model_uri():
    for case_id in ("option-model-name-clash", "option-model-file-uri"):
        case = _case(case_id)
        assert not case["sdk"]["accepted"]
        ours = trainops_render(case["spec"], GOLDEN["job_name"])
        assert not ours.accepted and any(path in ("model_channel_name", "model_uri") for path, _ in ours.problems)


def test_the_coverage_table_matches_the_sdk_signatures():
    """Every parameter of EstimatorBase, Framework and PyTorch is either a spec field (sdk_coverage.COVERED) or left
    out with a reason (sdk_coverage.LEFT_OUT), and nothing else: a parameter a new SDK adds fails here."""
    from trainops.spec.job import JobSpec
    from trainops.spec.sdk_coverage import COVERED, LEFT_OUT, SDK_VERSION, sdk_parameters

    assert SIGNATURES["versions"]["sagemaker"] == SDK_VERSION
    sdk = {name for names in SIGNATURES["signatures"].values() for name in names}
    assert sorted(sdk) == sdk_parameters()
    assert not set(COVERED) & set(LEFT_OUT)
    assert all(field in JobSpec.model_fields for field in COVERED.values())
    assert len(sdk) == 57 and len(COVERED) == 49


def test_docs_list_exactly_the_parameters_left_out_each_with_its_reason():
    from trainops.spec.sdk_coverage import LEFT_OUT

    text = SPEC_MD.read_text()
    section = text.split("## What the SDK adds and trainops leaves out", 1)[1].split("\n## ", 1)[0]
    listed = dict(re.findall(r"^- `([a-z_]+)`: (.+)$", section, flags=re.MULTILINE))
    assert sorted(listed) == sorted(LEFT_OUT)
    assert all(len(reason) > 30 for reason in listed.values())
