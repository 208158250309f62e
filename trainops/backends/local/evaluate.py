"""Running an evaluation script on this machine, under the evaluation contract (docs/contracts.md section 6).

The script gets the same environment it gets in a SageMaker processing job:

- ``SM_CHANNEL_MODEL``: a directory holding the extracted ``model.tar.gz`` (the training job's model directory);
- ``SM_CHANNEL_<NAME>`` for every other channel (``SM_CHANNEL_TEST`` for the test data), and ``SM_CHANNELS``, the
  JSON list of channel names;
- ``SM_OUTPUT_DATA_DIR`` and ``TRAINOPS_EVALUATION_DIR``: where it writes ``metrics.json`` (a flat JSON object of
  metric name -> number) and anything else it wants kept (a report, a loss-curve PNG);
- its hyperparameters as ``--key value`` arguments.

The script runs with the current Python, without a shell, in a process group of its own, so that a timeout or an
interrupt stops it and everything it started. Its output is streamed line by line with an ``[evaluate]`` prefix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from trainops.backends.hostfs.inputs import evaluation_script
from trainops.backends.hostfs.safe_fs import read_bounded
from trainops.backends.local.model_archive import extract_model
from trainops.backends.model_rules import script_arguments, validate_metrics  # noqa: F401 - re-exported
from trainops.errors import JobFailed, Problem, SpecError
from trainops.runtime.environment import env_name
from trainops.runtime.failure import TAIL_HEADING
from trainops.runtime.processes import parent_death_signal_setter

__all__ = ["LocalEvaluation", "extract_model", "local_path", "read_metrics", "run_evaluation"]

METRICS_FILE = "metrics.json"
METRICS_LIMIT_BYTES = 16 * 1024 * 1024  # a flat object of numbers: far more than any evaluation writes
MODEL_CHANNEL = "model"
LOG_PREFIX = "[evaluate]"
#: How many lines of the script's stderr a failure message quotes.
STDERR_TAIL_LINES = 20
#: Seconds between SIGTERM and SIGKILL when the script must be stopped: enough to flush files, not to stall a DAG.
STOP_GRACE_SECONDS = 5.0

#: Receives each line of the script's output, already prefixed; the second argument says it came from stderr.
LineSink = Callable[[str, bool], None]


@dataclass(frozen=True)
class LocalEvaluation:
    """What a local evaluation produced.

    Attributes:
        metrics: the contents of ``metrics.json``.
        output_dir: the evaluation directory (absolute).
        metrics_path: the ``metrics.json`` file.
        files: every other file the script wrote there, relative to ``output_dir``, sorted.
        duration_seconds: how long the script ran.
    """

    metrics: dict[str, float]
    output_dir: str
    metrics_path: str
    files: list[str] = field(default_factory=list)
    duration_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


def local_path(value: str | os.PathLike[str], field_name: str) -> Path:
    """A local path or ``file://`` URI as an absolute path; other URI schemes are refused, naming the field."""
    text = os.fspath(value)
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif "://" in text:
        raise SpecError(Problem(field_name, f"{text!r} is not a local path; the local backend reads local paths and "
                                            f"file:// URIs (stage s3:// data first, or use backend='sagemaker')"),
                        source="evaluation")
    if not text:
        raise SpecError(Problem(field_name, "empty path"), source="evaluation")
    return Path(text).expanduser().resolve()


def channel_environment(channels: Mapping[str, str | os.PathLike[str]]) -> dict[str, str]:
    """``SM_CHANNEL_<NAME>`` for each channel and ``SM_CHANNELS`` (sorted JSON list), as the toolkit names them."""
    env = {f"SM_CHANNEL_{env_name(name)}": os.fspath(path) for name, path in channels.items()}
    env["SM_CHANNELS"] = json.dumps(sorted(channels))
    return env


def contract_environment(channels: Mapping[str, str | os.PathLike[str]],
                         output_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Every variable of the evaluation contract (``channels`` includes the ``model`` channel)."""
    env = channel_environment(channels)
    env["SM_OUTPUT_DATA_DIR"] = os.fspath(output_dir)
    env["TRAINOPS_EVALUATION_DIR"] = os.fspath(output_dir)
    return env


def read_metrics(path: str | os.PathLike[str]) -> dict[str, float]:
    """Read and check ``metrics.json`` (see `validate_metrics`). Raises `JobFailed` when it is missing or wrong."""
    metrics_path = Path(path)
    try:  # the script wrote it: a regular file of at most METRICS_LIMIT_BYTES, never read through a link or a FIFO
        raw = read_bounded(metrics_path, METRICS_LIMIT_BYTES, whole=True)
    except FileNotFoundError:
        raise JobFailed(f"the evaluation script exited 0 but wrote no {METRICS_FILE}; write a flat JSON object of "
                        f"metric name -> number to {metrics_path} (its directory is in TRAINOPS_EVALUATION_DIR and "
                        f"SM_OUTPUT_DATA_DIR)") from None
    except OSError as error:
        raise JobFailed(f"{metrics_path} cannot be read ({error.strerror}); write a flat JSON object of metric name "
                        f"-> number there, as a regular file of at most {METRICS_LIMIT_BYTES:,} bytes") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # RecursionError: nested thousands deep
        raise JobFailed(f"{metrics_path} is not valid JSON ({error}); write a flat JSON object of metric name -> "
                        f"number, e.g. {{\"accuracy\": 0.97}}") from error
    return validate_metrics(data, str(metrics_path))


def default_sink(line: str, from_stderr: bool) -> None:
    """Print a line of the script's output on this process's matching stream, at once."""
    stream = sys.stderr if from_stderr else sys.stdout
    print(line, file=stream, flush=True)


def _pump(stream: IO[bytes], from_stderr: bool, sink: LineSink, tail: deque[str] | None) -> None:
    """Forward a pipe line by line (in a thread); remember the last stderr lines for the failure message."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if tail is not None:
            tail.append(line)
        sink(f"{LOG_PREFIX} {line}", from_stderr)
    stream.close()


def stop_process_group(process: subprocess.Popen[bytes], grace_seconds: float | None = None) -> None:
    """SIGTERM the process's whole group, then SIGKILL it if the leader is still there after ``grace_seconds``.

    The group is the script and whatever it started (it runs in a session of its own); members that outlive a
    leader who exited are killed too. ``grace_seconds`` defaults to `STOP_GRACE_SECONDS`.
    """
    grace_seconds = STOP_GRACE_SECONDS if grace_seconds is None else grace_seconds
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _exit_description(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    if code == 137:
        return "exited with code 137 (killed, likely out of memory)"
    return f"exited with code {code}"


def run_script(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    sink: LineSink,
    what: str,
    die_with_parent: bool = False,
) -> float:
    """Run one evaluation command to its end; return its duration in seconds.

    Raises `JobFailed` when it exits non-zero (quoting its last stderr lines) or runs past ``timeout`` (it is
    stopped first). On any interruption of this process the script's group is stopped before the error goes on.
    ``die_with_parent``: the kernel kills the script if this process is killed outright (a detached evaluation
    job's runner: nothing else would be left to stop it).
    """
    tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
    started = time.monotonic()
    process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=parent_death_signal_setter(signal.SIGKILL) if die_with_parent else None)
    pumps = [threading.Thread(target=_pump, args=(process.stdout, False, sink, None), daemon=True),
             threading.Thread(target=_pump, args=(process.stderr, True, sink, tail), daemon=True)]
    for pump in pumps:
        pump.start()
    timed_out = False
    try:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_process_group(process)
    except BaseException:
        # KeyboardInterrupt, SIGTERM turned into an exception by a caller, ...: never leave the script running.
        stop_process_group(process, grace_seconds=1.0)
        raise
    finally:
        # Children the script left behind would keep our pipes open (and run on): end the whole group.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pump in pumps:
            pump.join(timeout=10)
    duration = time.monotonic() - started
    last_lines = "\n".join(tail)
    if timed_out:
        raise JobFailed(f"{what} ran past its timeout of {timeout:g} s and was stopped; raise the timeout or make it "
                        f"faster" + (f"\n{TAIL_HEADING}\n{last_lines}" if last_lines else ""))
    if process.returncode != 0:
        raise JobFailed(f"{what} {_exit_description(process.returncode)}"
                        + (f"\n{TAIL_HEADING}\n{last_lines}" if last_lines else " (no stderr output)"))
    return duration


def resolve_entry_point(entry_point: str, source_dir: str | os.PathLike[str] | None) -> tuple[Path, Path]:
    """The script file and the directory it runs in (`trainops.backends.hostfs.inputs.evaluation_script`, the check
    the SageMaker evaluation makes too), local paths and ``file://`` URIs only. Raises `SpecError` naming the field
    that is wrong."""
    if source_dir is None:
        return evaluation_script(str(local_path(entry_point, "entry_point")), None)
    return evaluation_script(entry_point, local_path(source_dir, "source_dir"))


def _check_channels(channels: Mapping[str, str | os.PathLike[str]]) -> dict[str, Path]:
    resolved: dict[str, Path] = {}
    for name, value in channels.items():
        field_name = f"channels.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise SpecError(Problem(field_name, "a channel name is letters, digits, '-', '_' and '.'"),
                            source="evaluation")
        if name.lower() == MODEL_CHANNEL:
            raise SpecError(Problem(field_name, "the model channel is the model_artifact; give the model there and "
                                                "name this channel otherwise (for example 'test')"),
                            source="evaluation")
        path = local_path(value, field_name)
        if not path.exists():
            raise SpecError(Problem(field_name, f"{path} does not exist; give the directory holding this data"),
                            source="evaluation")
        resolved[name] = path
    return resolved


def prepare_model(model_artifact: str | os.PathLike[str], scratch: Path) -> Path:
    """The model channel's directory: a directory artifact as it is, a ``model.tar.gz`` extracted under ``scratch``."""
    artifact = local_path(model_artifact, "model_artifact")
    if artifact.is_dir():
        return artifact
    if not artifact.is_file():
        raise SpecError(Problem("model_artifact", f"{artifact} does not exist; give the training job's model.tar.gz "
                                                  f"(<output_path>/<job-name>/output/model.tar.gz)"),
                        source="evaluation")
    return extract_model(artifact, scratch / "model")


def evaluation_files(output_dir: Path) -> list[str]:
    """Every file under the evaluation directory except ``metrics.json``, relative and sorted."""
    metrics_path = output_dir / METRICS_FILE
    return sorted(path.relative_to(output_dir).as_posix() for path in output_dir.rglob("*")
                  if path.is_file() and path != metrics_path)


def run_evaluation(
    *,
    entry_point: str,
    source_dir: str | os.PathLike[str] | None,
    model_artifact: str | os.PathLike[str],
    channels: Mapping[str, str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    hyperparameters: Mapping[str, Any] | None = None,
    environment: Mapping[str, str] | None = None,
    timeout: float | None = None,
    sink: LineSink | None = None,
    python: str | None = None,
    die_with_parent: bool = False,
) -> LocalEvaluation:
    """Evaluate a model on this machine and return the metrics its script wrote.

    Args:
        entry_point: the script, relative to ``source_dir`` (or a path when ``source_dir`` is None).
        model_artifact: a ``model.tar.gz`` (local path or ``file://``), or a directory already holding the model.
        channels: data channels by name (``{"test": "data/test"}``); each becomes ``SM_CHANNEL_<NAME>``.
        output_dir: the evaluation directory; created; a ``metrics.json`` left there by an earlier run is removed
            first so that it cannot pass for this run's.
        hyperparameters: passed as ``--key value`` arguments.
        environment: extra variables; they win over the inherited environment, never over the contract's.
        timeout: seconds before the script is stopped (its whole process group) and the run fails.
        sink: receives each output line (prefixed with ``[evaluate]``); default: this process's stdout / stderr.
        python: the interpreter; default the current one.
        die_with_parent: the script is killed if this process is (`run_script`).

    Raises:
        SpecError: a missing script, channel or model, or a hostile archive.
        JobFailed: the script failed, timed out, or wrote no usable ``metrics.json``.
    """
    script, directory = resolve_entry_point(entry_point, source_dir)
    data_channels = _check_channels(channels)
    if timeout is not None and timeout <= 0:
        raise SpecError(Problem("timeout", f"{timeout!r} must be a positive number of seconds"), source="evaluation")
    target = local_path(output_dir, "output_dir")
    target.mkdir(parents=True, exist_ok=True)
    metrics_path = target / METRICS_FILE
    metrics_path.unlink(missing_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="trainops-evaluate-"))
    try:
        model_dir = prepare_model(model_artifact, scratch)
        env = dict(os.environ)
        env.update(environment or {})
        env.update(contract_environment({MODEL_CHANNEL: model_dir, **data_channels}, target))
        env["PYTHONUNBUFFERED"] = "1"  # the script's prints must stream, not arrive in one block at the end
        argv = [python or sys.executable, str(script), *script_arguments(hyperparameters)]
        duration = run_script(argv, cwd=directory, env=env, timeout=timeout, sink=sink or default_sink,
                              what=f"evaluation script {script.name}", die_with_parent=die_with_parent)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    metrics = read_metrics(metrics_path)
    return LocalEvaluation(metrics=metrics, output_dir=str(target), metrics_path=str(metrics_path),
                           files=evaluation_files(target), duration_seconds=round(duration, 3))
