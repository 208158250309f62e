"""trainops' CreateTrainingJob requests (`--launcher toolkit`) against the SageMaker Python SDK v2's, case by case.

The SDK's answers are captured in goldens/render.json by generate.py (run in its own venv: README.md); this test
never needs the SDK. Every case must agree exactly, or differ only as an adjudication of ADJUDICATIONS.md says.
"""

from __future__ import annotations

import re

import pytest

from differential.adjudications import all_names
from differential.compare import HERE, RENDER_GOLDEN, judge_render, load, report, trainops_render

GOLDEN = load(RENDER_GOLDEN)


def test_the_grid_is_large_and_records_the_oracle_versions():
    assert len(GOLDEN["cases"]) >= 800
    assert GOLDEN["versions"]["sagemaker"].startswith("2.")
    ids = [case["id"] for case in GOLDEN["cases"]]
    assert len(set(ids)) == len(ids)
    # both answers are represented: the comparison covers refusals as well as requests
    accepted = sum(case["sdk"]["accepted"] for case in GOLDEN["cases"])
    assert 100 < accepted < len(ids)


def test_every_case_agrees_with_the_sdk_or_is_adjudicated():
    verdicts = [judge_render(case, GOLDEN["job_name"]) for case in GOLDEN["cases"]]
    disagreements = [verdict for verdict in verdicts if verdict.kind == "disagree"]
    assert not disagreements, report(verdicts)
    agreeing = sum(verdict.kind == "agree" for verdict in verdicts)
    assert agreeing >= 0.8 * len(verdicts), report(verdicts)


def test_adjudications_are_documented_one_for_one():
    text = (HERE / "ADJUDICATIONS.md").read_text()
    documented = re.findall(r"^## `([a-z0-9.\-]+)`", text, flags=re.MULTILINE)
    assert sorted(documented) == sorted(all_names())
    for name in documented:
        section = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert "https://" in section, f"{name}: cite the AWS documentation"


@pytest.mark.parametrize("case_id", [
    "dist-smddp_disabled-ml.p4d.24xlarge", "tf-model-dir-none-2", "dist-pytorchddp_options-ml.p4d.24xlarge",
    "hetero-smddp-named",
    # issue 27: MWMS below TF 2.9 refused; hetero: no strategy built, parameter servers refused, one group named;
    # a user channel named code under isolation refused; legacy repositories and regions; py2 without a library;
    # TF 1.10 legacy mode refused; torch_distributed kept over mpi
    "tf-2.8.0-mwms", "tf-2.4.1-mwms", "hetero-no-distribution", "hetero-tf-no-distribution",
    "hetero-tf-parameter_server-named", "hetero-tf-mwms-named", "one-group-mpi", "one-group-tf-mpi",
    "one-group-tf-parameter_server", "isolation-code-channel", "region-cn-north-1-tensorflow-1.12.0-py3-ml.m5.xlarge",
    "region-us-east-1-pytorch-1.0.0-py3-ml.p3.2xlarge", "region-il-central-1-pytorch-1.0.0-py3-ml.p3.2xlarge",
    "region-eu-south-1-pytorch-1.0.0-py2-ml.m5.xlarge", "region-ap-southeast-5-tensorflow-1.13.1-py3-ml.m5.xlarge",
    "region-us-east-1-tensorflow-1.13.1-py3-ml.p3.2xlarge", "py2-tensorflow-2.1.0-parameter_server",
    "py2-pytorch-1.4.0-none", "py2-pytorch-1.4.0-torch_distributed", "py2-tensorflow-2.2.0-none",
    "region-us-east-1-tensorflow-1.10.0-py2-ml.m5.xlarge", "dist-mpi_and_torch_distributed-ml.p4d.24xlarge",
])
def test_cases_of_the_issue_agree_exactly(case_id):
    """The encodings issues 14 and 27 listed agree without any adjudication."""
    case = next(case for case in GOLDEN["cases"] if case["id"] == case_id)
    assert judge_render(case, GOLDEN["job_name"]).kind == "agree"


#: What only the SageMaker backend refuses (`render.sagemaker_problems`: data or instance types of this machine);
#: `validate` is backend-neutral and the local backend runs these specs.
SAGEMAKER_ONLY = (r"is local; the sagemaker backend reads S3", r"runs on this machine only: choose an ml\.\* instance",
                  # issue 46: instance types bind to the engines that run SageMaker's request, and the API counts
                  # what the launcher adds: both are the request's, not the spec's
                  r"is not a SageMaker training instance type", r"the launcher adds")


def test_validate_gives_the_verdict_render_gives_on_every_case():
    """Issue 27 item 6: `trainops validate` (parse_job_spec) refuses what `render` refuses, with the same fields,
    except the SageMaker backend's own checks of local data and local instance types."""
    from trainops.errors import SpecError
    from trainops.spec.loader import parse_job_spec

    differing = []
    for case in GOLDEN["cases"]:
        # the grid renders for the toolkit launcher: the spec says so, as a user's would
        data = {**{key: value for key, value in case["spec"].items() if value is not None}, "launcher": "toolkit"}
        try:
            parse_job_spec(data)
            validated, fields = True, set()
        except SpecError as error:
            validated, fields = False, {problem.path for problem in error.problems}
        rendered = trainops_render(case["spec"], GOLDEN["job_name"])
        if validated == rendered.accepted:
            if not validated:
                assert fields == {path for path, _ in rendered.problems}, case["id"]
            continue
        backend_only = validated and all(any(re.search(pattern, message) for pattern in SAGEMAKER_ONLY)
                                         for _, message in rendered.problems)
        if not backend_only:
            differing.append((case["id"], validated, rendered.error[:200]))
    assert not differing, differing


def test_the_deliberate_differences_table_is_the_render_adjudications_and_each_is_pinned_by_a_case():
    """docs/spec.md's table of deliberate differences (trainops.spec.sdk_differences) is the render side's
    adjudications, one for one, and every one of them settles at least one case the SDK answered."""
    from differential.adjudications import ALWAYS, RENDER_RULES
    from trainops.spec.sdk_differences import DIFFERENCES, names

    assert sorted(names()) == sorted([*ALWAYS, *(rule.name for rule in RENDER_RULES)])
    assert all(row.source.startswith("https://") for row in DIFFERENCES)
    settled = {judge_render(case, GOLDEN["job_name"]).adjudication for case in GOLDEN["cases"]}
    assert {rule.name for rule in RENDER_RULES} <= settled


@pytest.mark.parametrize("case_id", [
    # issue 36: one image for every instance group, the GPU one whenever a GPU group exists (either order, named
    # or not); instance_count with instance_groups refused as the SDK refuses it; the profiler as the SDK sends it
    "h36-cpu-gpu-no-distribution", "h36-cpu-gpu2-gpu-no-distribution", "h36-cpu-gpu-mpi-named",
    "h36-cpu-gpu-smddp-named", "h36-gpu-cpu-torch_distributed-named", "h36-cpu-gpu-smp_v1-named",
    "h36-instance-count-1", "h36-instance-count-2", "h36-instance-type-too", "h36-cpu-trn-torch_distributed-named",
    "r36-profiler-us-east-1-disabled0", "r36-profiler-ap-southeast-3-disabled0", "r36-profiler-ml.trn1.32xlarge",
    "r36-profiler-us-east-1-disabled1",
    # processes per host: sent with smdistributed beside torchrun or mpirun, and with a plain mpi section
    "p36-smddp-mpi0-ml.p4d.24xlarge", "p36-smddp_torchrun-mpi0-ml.p4d.24xlarge", "p36-smp_v2-mpi0-ml.p4d.24xlarge",
    "p36-none-mpi1-ml.p4d.24xlarge",
    # spot and warm pools within their limits; an S3 channel may stream beside a file system
    "s36-spot1-keepNone-ckpt-s3-local-wait7200", "s36-spot0-keep1800-ckpt-s3-local-waitNone",
    "f36-fsx-File-s3-fastfile",
])
def test_cases_of_issue_36_agree_exactly(case_id):
    case = next(case for case in GOLDEN["cases"] if case["id"] == case_id)
    verdict = judge_render(case, GOLDEN["job_name"])
    assert verdict.kind == "agree", verdict.detail
