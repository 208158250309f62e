"""Component settings: containerized by default (the Dockerfile's image, Python as the container's first process,
nothing installed), lightweight for kfp.local and for named packages (each shell exec'ing the next step)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainops import __version__
from trainops.components.factory import build_components, exec_python
from trainops.components.settings import (
    DEFAULT_IMAGE,
    EXECUTOR_COMMAND,
    LIGHTWEIGHT_BASE_IMAGE,
    LOCAL_SETTINGS,
    ComponentSettings,
    settings_for,
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
    assert "kfp.dsl.executor_main" in text  # still a lightweight Python component (kfp.local runs only those)


@pytest.mark.parametrize("step", STEPS)
def test_default_components_run_the_installed_function_in_the_dockerfiles_image(step):
    component = getattr(build_components(), step)
    spec = container(component)
    assert spec.image == DEFAULT_IMAGE == f"trainops:{__version__}"
    # Python is the command itself: no shell, nothing installed, no function source in the YAML
    assert spec.command == list(EXECUTOR_COMMAND) == ["python3", "-m", "trainops.components.executor"]
    assert spec.args[0::2] == ["--executor_input", "--function_to_execute"]
    assert "pip" not in full_command(component) and "def " not in full_command(component)


def test_an_image_of_our_own_is_containerized_and_installs_nothing():
    settings = settings_for("registry.example.com/trainops:1")
    assert settings.packages_to_install == () and settings.containerized
    ops = build_components(settings)
    assert container(ops.evaluate).image == "registry.example.com/trainops:1"
    assert container(ops.evaluate).command == list(EXECUTOR_COMMAND)
    with pytest.raises(ValueError, match="installs nothing"):
        ComponentSettings(packages_to_install=("x",))


def test_named_packages_make_lightweight_components_that_exec_python():
    extra = build_components(settings_for("img:1", ["scikit-learn==1.5.0"], ["https://pypi.example.com/simple"]))
    text = full_command(extra.register)
    assert "'scikit-learn==1.5.0'" in text and "--index-url https://pypi.example.com/simple" in text
    assert container(extra.register).image == "img:1"
    # the installing shell execs the program's shell, which execs Python: one process, the container's first
    assert '&& exec "$0" "$@"' in text and "exec env _KFP_RUNTIME=true python3 -m kfp.dsl.executor_main" in text
    assert container(build_components(settings_for(packages=["x"])).train).image == LIGHTWEIGHT_BASE_IMAGE
    options = settings_for(packages=["x"]).component_options()
    assert options["install_kfp_package"] is False and options["pip_index_urls"] is None


def test_the_lightweight_start_script_really_replaces_its_shell_with_python(tmp_path):
    # KFP's own script, rewritten, run by sh: the PID that sh had is Python's (nothing stays in between)
    command = container(build_components(LOCAL_SETTINGS).train).command
    assert exec_python(command) == command  # already rewritten, and rewriting is idempotent
    [script] = [part for part in command if "executor_main" in part]
    fake = tmp_path / "bin"
    (fake / "kfp" / "dsl").mkdir(parents=True)
    (fake / "kfp" / "__init__.py").write_text("")
    (fake / "kfp" / "dsl" / "__init__.py").write_text("")
    (fake / "kfp" / "dsl" / "executor_main.py").write_text("import os; print(os.getpid(), os.getppid())\n")
    (fake / "python3").symlink_to(sys.executable)
    done = subprocess.run(["sh", "-ec", "echo $$; " + script, "source"], capture_output=True, text=True,
                          env={"PATH": f"{fake}:/usr/bin:/bin", "PYTHONPATH": str(fake)}, timeout=60, check=True)
    shell_pid, (python_pid, _) = done.stdout.split()[0], done.stdout.split()[1:3]
    assert python_pid == shell_pid, done.stdout


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
