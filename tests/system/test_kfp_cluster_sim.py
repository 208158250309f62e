"""The compiled KFP pipeline run as a cluster would run it, without a cluster: the image stood in for by a fresh
virtual environment with exactly what the Dockerfile installs, each component started by its own compiled command
line the way the KFP launcher starts it, outputs chained through the whole digits pipeline, then a SIGTERM; and the
same pipeline compiled as lightweight components onto that image, loaded from its YAML and run by ``kfp.local``'s
Docker-free SubprocessRunner (which refuses containerized components, hence the lightweight compile).

Both are compiled with ``--work-pvc`` as ``trainops kfp compile`` requires for the local backend: the claim's
mount path (the ``workdir`` parameter's default, ``/var/lib/trainops``) is mapped to one directory of this machine
that every task of a run shares, as every pod shares the claim: the launcher maps the mounts each executor's
Kubernetes config names; kfp.local, which has no volumes, gets the mapped directory as ``workdir``.

What stands for what:

- the image: the wheel built from the files the Dockerfile copies, installed with the Dockerfile's ``EXTRAS`` and
  ``constraints.txt`` into a new venv (cached between runs, keyed by what it installs; the wheel itself is rebuilt
  and reinstalled every run), and a directory standing for the image's ``WORKDIR`` holding the Dockerfile's
  ``PIPELINE_DIR`` (``examples/``). Components run there, with the venv's ``bin`` first on ``PATH`` (``python3`` is
  the venv's), ``TRAINOPS_HOME`` as the Dockerfile sets it, and neither the checkout nor its venv on ``sys.path``;
- the launcher: for each task of the compiled YAML's DAG (condition sub-DAGs included), the executor input JSON
  (parameter values typed as the component declares them, input artifacts with the URI and metadata their producer
  wrote, output artifacts and the executor output file under a local artifact root), the container's ``command`` +
  ``args`` with ``{{$}}`` replaced, the ``triggerPolicy`` conditions evaluated, and the producer's
  ``executor_output.json`` read back for the next tasks. Artifact URIs are local paths, as kfp.local uses them; the
  real launcher's upload and download of ``s3://``/``minio://`` URIs is not exercised;
- the container runtime: a small parent that is a child subreaper (as containerd's shim is), so any process a
  component leaves behind is found after it exits.

Not proven here (docs/kubeflow.md says so too): the image build itself (no Docker daemon), pulling it, the real KFP
launcher and driver, a real claim shared by pods on different nodes, Secrets reaching a pod, Kubernetes' SIGTERM ->
grace -> SIGKILL on pod deletion, and artifact stores.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.cached_venv import TORCH_JOB_MODULES, warm, warm_imports

pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
#: The PersistentVolumeClaim the pipeline is compiled with (`--work-pvc`): the work directory the steps share.
CLAIM = "sim-work"
DOCKERFILE = REPO / "Dockerfile"
CACHE = Path(os.environ.get("TRAINOPS_TEST_CACHE") or Path.home() / ".cache" / "trainops-tests")

#: The container runtime stand-in: subreaper parent of one component; reports its pid, exit code and leftovers.
RUNTIME = r'''
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come to us
command, cwd = json.loads(sys.argv[1]), sys.argv[2]
process = subprocess.Popen(command, cwd=cwd)
print(json.dumps({"pid": process.pid}), flush=True)
code = process.wait()

def children():
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == os.getpid() and state != "Z":
                found.append((int(entry), open(f"/proc/{entry}/cmdline").read().replace("\0", " ")[:200]))
        except OSError:
            pass
    return found

deadline = time.time() + 5
left = children()
while left and time.time() < deadline:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    time.sleep(0.1)
    left = children()
for pid, _ in left:
    os.kill(pid, signal.SIGKILL)
print(json.dumps({"exit": code, "left": [line for _, line in left]}), flush=True)
'''


#: kfp.local running a compiled YAML file, loaded through kfp's own parser, in the image's Python; prints what ran.
KFP_LOCAL = r'''
import json, logging, sys
from pathlib import Path

import kfp.local
from kfp import components
from trainops.components.local_run import TASK_ORDER, KfpLogRecorder, collect_tasks

compiled, pipeline_root, arguments = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
pipeline = components.load_component_from_file(compiled)
kfp.local.init(runner=kfp.local.SubprocessRunner(use_venv=False), pipeline_root=str(pipeline_root),
               raise_on_error=False)
recorder = KfpLogRecorder()
logging.getLogger().addFilter(recorder)
pipeline(**arguments)
[run] = [entry for entry in pipeline_root.iterdir() if entry.is_dir()]
tasks = collect_tasks(run, list(TASK_ORDER), recorder.tasks)
print("KFP-LOCAL " + json.dumps({"pipeline": recorder.pipeline_status, "tasks": {
    name: {"state": task.state, "parameters": task.parameters, "artifacts": task.artifacts}
    for name, task in tasks.items()}}), flush=True)
'''


# --- the image ----------------------------------------------------------------------------------------------------
def dockerfile_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(.*)$", DOCKERFILE.read_text(), re.M)
    assert match, f"the Dockerfile has no ARG {name}=..."
    return match.group(1).strip()


def build_wheel(out: Path) -> Path:
    """The wheel, built from exactly the files the Dockerfile copies (never the checkout's other files)."""
    source = out / "src"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "trainops", source / "trainops", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--wheel-dir", str(out / "dist"), str(source)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (out / "dist").glob("trainops-*.whl")
    return wheel


#: What the components import in the image (KFP's executor, the steps' libraries, the example's scripts).
IMAGE_WARM = warm_imports("kfp", "kfp.dsl", "kfp.dsl.executor_main", "kfp.kubernetes", "yaml", "pydantic", "boto3",
                          "botocore", "platformdirs", *TORCH_JOB_MODULES, "sklearn.datasets",
                          "sklearn.model_selection", "matplotlib", "matplotlib.pyplot")


def image_venv(wheel: Path) -> Path:
    """A venv with what the Dockerfile installs: cached by (extras, constraints, dependencies); the wheel fresh."""
    extras = dockerfile_arg("EXTRAS")
    pyproject = (REPO / "pyproject.toml").read_text()
    dependencies = pyproject[pyproject.index("dependencies"):pyproject.index("[project.scripts]")]
    key = hashlib.sha256("\n".join([extras, (REPO / "constraints.txt").read_text(), dependencies,
                                    sys.version]).encode()).hexdigest()[:16]
    venv = CACHE / f"kfp-image-{key}"
    if not (venv / ".complete").exists():
        building = CACHE / f"kfp-image-{key}.building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        building.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(building)], check=True,
                       timeout=300)
        # --no-compile, then the modules the components import compiled once (`support.cached_venv` says why)
        done = subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile",
                               "--constraint", str(REPO / "constraints.txt"), f"{wheel}[{extras}]"],
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        warm(building / "bin" / "python", IMAGE_WARM, timeout=600)
        (building / ".complete").write_text(extras)
        try:
            building.rename(venv)  # venvs are relocatable enough for `python -m`: scripts are not used
        except OSError:  # another run finished first
            shutil.rmtree(building, ignore_errors=True)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                           "--force-reinstall", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("kfp-cluster")
    wheel = build_wheel(root / "wheel")
    venv = image_venv(wheel)
    image = root / "image"  # the image's WORKDIR, holding the Dockerfile's PIPELINE_DIR
    pipeline_dir = dockerfile_arg("PIPELINE_DIR")
    shutil.copytree(REPO / pipeline_dir, image / pipeline_dir,
                    ignore=shutil.ignore_patterns("__pycache__", "runs"))
    (root / "home").mkdir()
    compiled = root / "digits.yaml"
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "kfp", "compile", "examples/digits/pipeline.yaml",
                           "-o", str(compiled), "--work-pvc", CLAIM], cwd=str(REPO), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    document, platform = yaml.safe_load_all(compiled.read_text())
    volumes = root / "volumes"  # each claim's contents: the mount path of every pod mounting it is mapped here
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(root / "home"),
        "TRAINOPS_HOME": str(volumes / CLAIM),  # the image's TRAINOPS_HOME is the claim's default mount path
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
    }
    return {"root": root, "venv": venv, "image": image, "yaml": document, "env": env, "wheel": wheel,
            "kubernetes": platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"], "volumes": volumes}


# --- the launcher -------------------------------------------------------------------------------------------------
PARAMETER_TYPES = {"NUMBER_INTEGER": int, "NUMBER_DOUBLE": float, "BOOLEAN": bool, "STRING": str}


class Launcher:
    """Runs the compiled pipeline's tasks one by one, as KFP's launcher would, and records what each produced."""

    def __init__(self, cluster: dict, run: str, arguments: dict | None = None):
        self.cluster = cluster
        self.document = cluster["yaml"]
        self.store = cluster["root"] / "artifacts" / run
        self.root_parameters = {name: spec.get("defaultValue") for name, spec in
                                self.document["root"]["inputDefinitions"]["parameters"].items()}
        self.root_parameters.update(arguments or {})
        self.outputs: dict[str, dict] = {}  # task -> executor output (parameterValues, artifacts)
        self.states: dict[str, str] = {}
        self.logs: dict[str, str] = {}

    # inputs ---------------------------------------------------------------------------------------------------
    def parameter(self, source: dict, scope: dict) -> object:
        if "runtimeValue" in source:
            return source["runtimeValue"]["constant"]
        if "componentInputParameter" in source:
            return scope["parameters"][source["componentInputParameter"]]
        producer = source["taskOutputParameter"]
        return self.outputs[producer["producerTask"]]["parameterValues"][producer["outputParameterKey"]]

    def artifact(self, source: dict, scope: dict) -> dict:
        if "componentInputArtifact" in source:
            return scope["artifacts"][source["componentInputArtifact"]]
        producer = source["taskOutputArtifact"]
        return self.outputs[producer["producerTask"]]["artifacts"][producer["outputArtifactKey"]]

    def task_inputs(self, task: dict, scope: dict) -> dict:
        inputs = task.get("inputs", {})
        return {"parameters": {name: self.parameter(source, scope)
                               for name, source in inputs.get("parameters", {}).items()},
                "artifacts": {name: self.artifact(source, scope)
                              for name, source in inputs.get("artifacts", {}).items()}}

    # running --------------------------------------------------------------------------------------------------
    def run_dag(self, dag: dict, scope: dict) -> None:
        pending = dict(dag["tasks"])
        while pending:
            ready = [name for name, task in pending.items()
                     if all(dependency in self.states for dependency in task.get("dependentTasks", []))]
            assert ready, f"no task can run: {sorted(pending)}"
            for name in sorted(ready):
                task = pending.pop(name)
                if any(self.states[dependency] != "SUCCEEDED" for dependency in task.get("dependentTasks", [])):
                    self.states[name] = "NOT_RUN"
                    continue
                inputs = self.task_inputs(task, scope)
                condition = task.get("triggerPolicy", {}).get("condition")
                if condition and not self.holds(condition, inputs):
                    self.states[name] = "SKIPPED"
                    continue
                component = self.document["components"][task["componentRef"]["name"]]
                if "dag" in component:
                    self.run_dag(component["dag"], inputs)
                    self.states[name] = "SUCCEEDED"
                else:
                    self.states[name] = self.run_task(name, component, inputs)

    @staticmethod
    def holds(condition: str, inputs: dict) -> bool:
        match = re.fullmatch(r"inputs\.parameter_values\['([^']+)'\] == (true|false)", condition)
        assert match, f"a condition this launcher does not read: {condition}"
        return inputs["parameters"][match.group(1)] is (match.group(2) == "true")

    def mounts(self, component: dict) -> dict[str, Path]:
        """The executor's claims as its Kubernetes config says (kfp-kubernetes' ``pvcMount``): mount path -> the
        local directory standing for the claim (the same one for every pod that mounts it)."""
        config = self.cluster["kubernetes"].get(component["executorLabel"], {})
        return {mount["mountPath"]: self.cluster["volumes"] / mount["constant"] for mount in config.get("pvcMount", [])}

    def mapped(self, value: object, mounts: dict[str, Path]) -> object:
        """A parameter value with a mounted path's prefix replaced by its claim's directory (a pod sees the claim
        at its mount path; this machine has it at a temporary directory)."""
        for mount_path, directory in mounts.items():
            if isinstance(value, str) and (value == mount_path or value.startswith(mount_path.rstrip("/") + "/")):
                return str(directory) + value[len(mount_path):]
        return value

    def executor_input(self, name: str, component: dict, inputs: dict) -> dict:
        task_dir = self.store / name
        declared = component.get("inputDefinitions", {}).get("parameters", {})
        mounts = self.mounts(component)
        parameters = {key: PARAMETER_TYPES.get(declared.get(key, {}).get("parameterType"), lambda v: v)(
                          self.mapped(value, mounts)) for key, value in inputs["parameters"].items()}
        outputs = component.get("outputDefinitions", {})
        return {
            "inputs": {"parameterValues": parameters,
                       "artifacts": {key: {"artifacts": [artifact]} for key, artifact in inputs["artifacts"].items()}},
            "outputs": {
                "parameters": {key: {"outputFile": str(task_dir / "parameters" / key)}
                               for key in outputs.get("parameters", {})},
                "artifacts": {key: {"artifacts": [{"name": key, "type": spec["artifactType"],
                                                   "uri": str(task_dir / "artifacts" / key), "metadata": {}}]}
                              for key, spec in outputs.get("artifacts", {}).items()},
                "outputFile": str(task_dir / "executor_output.json"),
            },
        }

    def command(self, component: dict, executor_input: dict) -> list[str]:
        container = self.document["deploymentSpec"]["executors"][component["executorLabel"]]["container"]
        assert container["image"].startswith("trainops:"), container["image"]
        placeholder = json.dumps(executor_input)
        return [*container["command"], *[placeholder if arg == "{{$}}" else arg for arg in container["args"]]]

    def start(self, name: str, component: dict, inputs: dict) -> subprocess.Popen:
        executor_input = self.executor_input(name, component, inputs)
        (self.store / name).mkdir(parents=True, exist_ok=True)
        command = self.command(component, executor_input)
        python = str(self.cluster["venv"] / "bin" / "python")
        return subprocess.Popen([python, "-c", RUNTIME, json.dumps(command), str(self.cluster["image"])],
                                env=self.cluster["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)

    def run_task(self, name: str, component: dict, inputs: dict) -> str:
        runtime = self.start(name, component, inputs)
        output, _ = runtime.communicate(timeout=900)
        self.logs[name] = output
        report = json.loads(output.strip().splitlines()[-1])
        assert report["left"] == [], f"{name} left processes behind: {report['left']}"
        if report["exit"] != 0:
            return "FAILED"
        written = json.loads((self.store / name / "executor_output.json").read_text())
        produced = {"parameterValues": dict(written.get("parameterValues", {})), "artifacts": {}}
        for key, artifact in self.executor_input(name, component, inputs)["outputs"]["artifacts"].items():
            final = dict(artifact["artifacts"][0])
            updated = (written.get("artifacts", {}).get(key) or {}).get("artifacts") or [{}]
            final.update({k: v for k, v in updated[0].items() if k in ("uri", "metadata")})
            produced["artifacts"][key] = final
        self.outputs[name] = produced
        return "SUCCEEDED"


def with_epochs(launcher_parameters: dict, epochs: int) -> str:
    from trainops.components.paths import decode_parameter, encode_parameter

    spec = json.loads(decode_parameter(launcher_parameters["spec_json"]))
    spec["hyperparameters"] = {**spec.get("hyperparameters", {}), "epochs": epochs}
    return encode_parameter(spec)


# --- the tests ----------------------------------------------------------------------------------------------------
def test_the_image_has_no_checkout_on_its_path(cluster):
    code = "import trainops, sys, json; print(json.dumps([trainops.__file__, sys.path]))"
    done = subprocess.run(["python3", "-c", code], cwd=str(cluster["image"]), env=cluster["env"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    location, path = json.loads(done.stdout)
    assert location.startswith(str(cluster["venv"])), location
    # By path component: a cache beside the checkout (/tmp/ci and /tmp/ci-cache) shares its name's first letters.
    assert not any(entry and Path(entry).resolve().is_relative_to(REPO) for entry in path), path


@pytest.fixture(scope="module")
def pipeline_run(cluster):
    defaults = {name: spec.get("defaultValue") for name, spec in
                cluster["yaml"]["root"]["inputDefinitions"]["parameters"].items()}
    launcher = Launcher(cluster, "first", {"spec_json": with_epochs(defaults, 6)})
    started = time.monotonic()
    launcher.run_dag(cluster["yaml"]["root"]["dag"], {"parameters": launcher.root_parameters, "artifacts": {}})
    return launcher, time.monotonic() - started


def test_every_component_runs_from_its_compiled_command_line_and_chains_its_outputs(pipeline_run, cluster):
    launcher, seconds = pipeline_run
    print(f"cluster simulation: the digits pipeline took {seconds:.0f} s")
    failed = {name: launcher.logs.get(name, "")[-4000:] for name, state in launcher.states.items()
              if state == "FAILED"}
    assert not failed, failed
    assert launcher.states == {"prepare-data": "SUCCEEDED", "stage-data": "SUCCEEDED", "train-model": "SUCCEEDED",
                               "evaluate-model": "SUCCEEDED", "condition-2": "SUCCEEDED",
                               "register-model": "SUCCEEDED", "condition-1": "SKIPPED"}
    # every executor mounts the claim, at the workdir parameter's default: the steps shared their files through it
    mounts = {name: [(mount["constant"], mount["mountPath"]) for mount in config["pvcMount"]]
              for name, config in cluster["kubernetes"].items()}
    assert set(mounts) == set(launcher.document["deploymentSpec"]["executors"])
    assert set(map(tuple, mounts.values())) == {((CLAIM, launcher.root_parameters["workdir"]),)}
    model = launcher.outputs["train-model"]["artifacts"]["model"]
    work = cluster["volumes"] / CLAIM
    assert Path(model["uri"]).name == "model.tar.gz" and Path(model["uri"]).is_relative_to(work)
    assert (work / "fsx" / "digits" / "train").is_dir() and (work / "raw").is_dir()  # prepare -> stage -> train
    assert model["metadata"]["backend"] == "local" and model["metadata"]["reattached"] is False
    assert launcher.outputs["evaluate-model"]["parameterValues"]["Output"] is True
    metrics = launcher.outputs["evaluate-model"]["artifacts"]["metrics"]["metadata"]
    assert metrics["accuracy"] >= 0.95
    report = launcher.outputs["evaluate-model"]["artifacts"]["report"]  # the page, by its name, where the URI says
    assert report["uri"].endswith(".html") and "<h1>Digits classifier evaluation</h1>" in Path(report["uri"]).read_text()
    registered = launcher.outputs["register-model"]["parameterValues"]
    assert (registered["version"], registered["approval_status"]) == (1, "Approved")
    # nothing was installed at run time, and the code that ran is the image's (the venv's), not the checkout's
    for name, log in launcher.logs.items():
        assert "pip install" not in log and "Installing collected packages" not in log, name


def test_sigterm_to_the_train_components_first_process_stops_the_job(pipeline_run, cluster):
    launcher, _ = pipeline_run
    train = launcher.document["root"]["dag"]["tasks"]["train-model"]
    component = launcher.document["components"][train["componentRef"]["name"]]
    inputs = launcher.task_inputs(train, {"parameters": {**launcher.root_parameters, "run_key": "sigterm",
                                                         "spec_json": with_epochs(launcher.root_parameters, 500)},
                                          "artifacts": {}})
    runtime = launcher.start("train-model-sigterm", component, inputs)
    try:
        first = json.loads(runtime.stdout.readline())
        lines: list[str] = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # until the job's hosts train (an epoch line from a rank)
            line = runtime.stdout.readline()
            if not line:
                break
            lines.append(line)
            if re.search(r"epoch 1/500", line):
                break
        assert any("epoch 1/500" in line for line in lines), "".join(lines[-40:])
        [job] = {match.group(1) for line in lines for match in [re.search(r"training job (\S+) \(local\)", line)]
                 if match}
        os.kill(first["pid"], signal.SIGTERM)  # what the kubelet sends the container's first process
        sent = time.monotonic()
        rest, _ = runtime.communicate(timeout=120)
        stopped_after = time.monotonic() - sent
    finally:
        if runtime.poll() is None:
            os.killpg(runtime.pid, signal.SIGKILL)
            runtime.wait()
    report = json.loads(rest.strip().splitlines()[-1])
    print(f"cluster simulation: SIGTERM -> component exited {report['exit']} after {stopped_after:.1f} s")
    assert report["exit"] != 0, rest[-3000:]
    assert report["left"] == [], f"processes left after the component exited: {report['left']}"
    assert stopped_after < 30, rest[-3000:]
    status = json.loads((cluster["volumes"] / CLAIM / "jobs" / job / "status.json").read_text())
    assert status["status"] == "Stopped", status


# --- the compiled YAML in kfp.local ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kfp_local_run(cluster):
    """The digits pipeline compiled for the cluster as lightweight components (kfp.local's SubprocessRunner runs
    no other kind) onto the image, run from the YAML by kfp.local in the image's Python. kfp.local has no volumes:
    the claim's mount path, the ``workdir`` parameter's default, is mapped to a directory of this machine."""
    root = cluster["root"]
    compiled = root / "digits-lightweight.yaml"
    from trainops import __version__

    done = subprocess.run([sys.executable, "-m", "trainops.cli", "kfp", "compile", "examples/digits/pipeline.yaml",
                           "-o", str(compiled), "--work-pvc", CLAIM, "--image", f"trainops-sim:{__version__}",
                           "--package", f"trainops[kfp,torch]=={__version__}"], cwd=str(REPO), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    document, platform = yaml.safe_load_all(compiled.read_text())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    [mount_path] = {mount["mountPath"] for config in executors.values() for mount in config["pvcMount"]}
    defaults = {name: spec.get("defaultValue") for name, spec in
                document["root"]["inputDefinitions"]["parameters"].items()}
    assert defaults["workdir"] == mount_path
    volume = cluster["volumes"] / "kfp-local"
    arguments = {"workdir": str(volume), "spec_json": with_epochs(defaults, 4)}
    # the components' start-up pip install finds the requirement in the image, offline (as on an image holding it)
    env = {**cluster["env"], "TRAINOPS_HOME": str(volume), "PIP_NO_INDEX": "1"}
    started = time.monotonic()
    done = subprocess.run([str(cluster["venv"] / "bin" / "python"), "-c", KFP_LOCAL, str(compiled),
                           str(root / "kfp-local-root"), json.dumps(arguments)], cwd=str(cluster["image"]), env=env,
                          capture_output=True, text=True, timeout=1200)
    seconds = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("KFP-LOCAL ")]
    assert done.returncode == 0 and lines, done.stdout[-6000:] + done.stderr[-3000:]
    return json.loads(lines[-1][len("KFP-LOCAL "):]), volume, done.stdout + done.stderr, seconds


def test_kfp_local_runs_the_compiled_yaml_with_the_claims_mount_path_mapped(kfp_local_run):
    outcome, volume, log, seconds = kfp_local_run
    print(f"kfp.local: the compiled digits pipeline took {seconds:.0f} s")
    states = {name: task["state"] for name, task in outcome["tasks"].items()}
    assert outcome["pipeline"] == "SUCCESS" and states == {
        "prepare-data": "SUCCEEDED", "stage-data": "SUCCEEDED", "train-model": "SUCCEEDED",
        "evaluate-model": "SUCCEEDED", "register-model": "SUCCEEDED", "gate-failed": "SKIPPED"}, log[-6000:]
    assert "epoch 4/4" in log  # the run's spec_json argument reached the job's hosts
    # the steps handed their files over through the mapped claim: prepare -> stage -> train -> evaluate -> register
    train = outcome["tasks"]["train-model"]
    [model] = train["artifacts"]["model"]
    assert Path(model["uri"]).is_relative_to(volume) and Path(model["uri"]).is_file()
    assert (volume / "raw").is_dir() and (volume / "fsx" / "digits" / "train").is_dir()
    assert (volume / "jobs" / train["parameters"]["job_name"] / "status.json").is_file()
    registered = outcome["tasks"]["register-model"]["parameters"]
    assert registered["version"] == 1 and str(registered["location"]).startswith(str(volume))
