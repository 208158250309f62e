"""Component settings: what each component installs (nothing for local runs), and in which image."""

from __future__ import annotations

import pytest

from trainops import __version__
from trainops.components.factory import build_components
from trainops.components.settings import (
    DEFAULT_BASE_IMAGE, LOCAL_SETTINGS, ComponentSettings, settings_for,
)

STEPS = ("prepare", "stage", "train", "evaluate", "register", "gate_failed")


def container(component):
    return component.component_spec.implementation.container


def full_command(component) -> str:
    spec = container(component)
    return " ".join([*spec.command, *spec.args])


@pytest.mark.parametrize("step", STEPS)
def test_local_components_install_nothing(step):
    component = getattr(build_components(LOCAL_SETTINGS), step)
    text = full_command(component)
    # kfp.local's SubprocessRunner looks for these words to decide that a task installs packages
    assert "pip install" not in text and "ensurepip" not in text
    assert f"kfp=={__import__('kfp').__version__}" not in text
    assert "kfp.dsl.executor_main" in text  # still a lightweight Python component


def test_default_components_install_this_trainops_with_its_extras_and_no_separate_kfp():
    ops = build_components()
    text = full_command(ops.train)
    assert container(ops.train).image == DEFAULT_BASE_IMAGE
    assert f"'trainops[aws,kfp]=={__version__}'" in text
    assert "kfp==" not in text  # kfp comes with trainops[kfp]; an injected pin would be a second install


def test_an_image_of_our_own_installs_nothing_unless_asked():
    settings = settings_for("registry.example.com/trainops:1")
    assert settings.packages_to_install == () and settings.base_image == "registry.example.com/trainops:1"
    ops = build_components(settings)
    assert container(ops.evaluate).image == "registry.example.com/trainops:1"
    assert "pip install" not in full_command(ops.evaluate)

    extra = build_components(settings_for("img:1", ["scikit-learn==1.5.0"], ["https://pypi.example.com/simple"]))
    text = full_command(extra.register)
    assert "'scikit-learn==1.5.0'" in text and "--index-url https://pypi.example.com/simple" in text


def test_settings_without_an_image_default_to_installing_trainops():
    assert settings_for().packages_to_install == (f"trainops[aws,kfp]=={__version__}",)
    assert settings_for(packages=["trainops[aws,kfp] @ https://example.com/t.whl"]).packages_to_install == (
        "trainops[aws,kfp] @ https://example.com/t.whl",)
    options = ComponentSettings().component_options()
    assert options["install_kfp_package"] is False and options["pip_index_urls"] is None


def test_components_keep_their_typed_interface():
    ops = build_components(LOCAL_SETTINGS)
    train = ops.train.component_spec
    assert train.outputs["model"].type == "system.Model@0.0.1"
    assert {name: train.outputs[name].type for name in ("job_name", "status", "reattached", "model_artifact")} == {
        "job_name": "String", "status": "String", "reattached": "Boolean", "model_artifact": "String"}
    evaluate = ops.evaluate.component_spec
    assert evaluate.inputs["model"].type == "system.Model@0.0.1"
    assert evaluate.outputs["metrics"].type == "system.Metrics@0.0.1"
    assert evaluate.outputs["report"].type == "system.HTML@0.0.1"
    assert evaluate.outputs["Output"].type == "Boolean"
    assert ops.register.component_spec.inputs["metrics"].optional is True
