"""The slurm backend's dry run: the batch script `trainops render --backend slurm` shows, the same job's slurmrestd
properties, its options, and what it refuses before anything is written (every problem at once, by field)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from trainops.backends import get_backend
from trainops.backends.slurm.script import BatchJob, batch_script, rest_job, time_limit
from trainops.errors import SpecError
from trainops.spec.loader import parse_job_spec


@pytest.fixture
def spec(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    return parse_job_spec({"name": "bert", "entry_point": "train.py", "source_dir": str(tmp_path),
                           "instance_type": "ml.p4d.24xlarge", "instance_count": 4, "max_run": 3725,
                           "distribution": {"type": "torch_distributed"}, "hyperparameters": {"epochs": 3}})


def backend(tmp_path, **options):
    return get_backend("slurm", options={"shared_dir": str(tmp_path / "shared"), **options})


def test_the_batch_script_asks_one_task_per_node_and_starts_the_runtime_on_each(spec, tmp_path):
    script = backend(tmp_path, partition="train", account="ml", hyperpod="true",
                     sbatch_options={"gres": "gpu:8"}).render_request(spec, "bert-1")
    job_dir = tmp_path / "shared" / "jobs" / "bert-1"
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for expected in ("--job-name=bert-1", "--nodes=4", "--ntasks-per-node=1", "--time=0-01:02:05", "--no-requeue",
                     f"--output={job_dir}/logs/batch-%j.log", f"--chdir={job_dir}",
                     "--partition=train", "--account=ml", "--exclusive", "--gres=gpu:8"):
        assert f"#SBATCH {expected}" in lines, expected
    [srun] = [line for line in lines if line.startswith("srun ")]
    assert srun.startswith("srun --nodes=4 --ntasks=4 --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL --mpi=none "
                           "--auto-resume=1 ")
    assert srun.endswith('"$PYTHON" -I -S "$NODE" run "$JOB_DIR" &')  # waited for: the trap runs at once
    assert lines[lines.index(srun) + 1].startswith("wait $!")
    assert lines[-1] == 'exec "$PYTHON" -I -S "$NODE" finish "$JOB_DIR" "$?"'
    # Slurm's SIGTERM (scancel, the time limit, a lost node): the job records how it ended before it goes.
    assert 'trap \'"$PYTHON" -I -S "$NODE" ended-by-slurm "$JOB_DIR"; exit 143\' TERM' in lines
    assert lines.index('trap \'"$PYTHON" -I -S "$NODE" ended-by-slurm "$JOB_DIR"; exit 143\' TERM') < lines.index(srun)
    assert not any(line.startswith("#SBATCH --export") for line in lines)  # Slurm's default: the submitter's
    assert not (tmp_path / "shared").exists()  # a dry run writes nothing


def test_auto_resume_only_on_hyperpod_and_the_rest_job_says_what_the_script_says(spec, tmp_path):
    script = backend(tmp_path).render_request(spec, "bert-1")
    assert "--auto-resume" not in script and "PYTHON=python3" in script
    job = BatchJob(job_name="bert-1", job_dir="/fsx/jobs/bert-1", nodes=4, time_seconds=3725, token="t",
                   partition="train", constraint="ml.p4d.24xlarge", exclusive=True)
    properties = rest_job(job, {"PATH": "/usr/bin"})
    assert properties["nodes"] == [4, 4] and properties["tasks_per_node"] == 1 and properties["tasks"] == 4
    assert properties["time_limit"] == 63 and properties["requeue"] is False  # minutes, rounded up
    assert properties["constraints"] == "ml.p4d.24xlarge" and properties["exclusive"] == "exclusive"
    assert properties["comment"] == "trainops:t" and properties["standard_output"] == "/fsx/jobs/bert-1/logs/batch-%j.log"
    assert "#SBATCH --constraint=ml.p4d.24xlarge" in batch_script(job)


@pytest.mark.parametrize(("seconds", "text"), [(1, "0-00:00:01"), (86400, "1-00:00:00"), (90061, "1-01:01:01")])
def test_max_run_becomes_the_time_limit(seconds, text):
    assert time_limit(seconds) == text


def test_the_dry_run_refuses_what_slurm_cannot_run_every_problem_at_once(tmp_path):
    (tmp_path / "train.py").write_text("")
    spec = parse_job_spec({"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "ml.p4d.24xlarge",
                           "instance_count": 2, "launcher": "toolkit",
                           "distribution": {"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 2}},
                           "output_path": "s3://bucket/out", "use_spot_instances": True, "max_wait": 90000,
                           "inputs": {"train": {"file_system_id": "fs-0123456789abcdef0",
                                                "directory_path": "/abcdef/data"}},
                           "subnets": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]})
    with pytest.raises(SpecError) as raised:
        backend(tmp_path).dry_run(spec, "bad-1", backend(tmp_path).options())
    fields = {problem.path for problem in raised.value.problems}
    assert fields == {"distribution", "launcher", "use_spot_instances", "output_path", "inputs.train"}, raised.value
    assert "fsx_mount" in str(raised.value) and "SMP v1" in str(raised.value) and "SMP v2" in str(raised.value)


def test_an_fsx_channel_is_read_under_the_fsx_mount(tmp_path):
    from trainops.backends.slurm.layout import channel_overrides
    from trainops.backends.slurm.options import SlurmOptions

    (tmp_path / "train.py").write_text("")
    spec = parse_job_spec({"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "ml.p4d.24xlarge",
                           "inputs": {"train": {"file_system_id": "fs-0123456789abcdef0",
                                                "directory_path": "/abcdef/datasets/digits"},
                                      "test": "s3://bucket/test"},
                           "subnets": ["subnet-0123abcd"], "security_group_ids": ["sg-0123abcd"]})
    chosen = SlurmOptions(fsx_mount="/fsx", channel_overrides={"test": "/fsx/test"})
    assert channel_overrides(spec, chosen) == {"train": "/fsx/datasets/digits", "test": "/fsx/test"}


@pytest.mark.parametrize(("settings", "field"), [
    ({"launcher": "toolkit"}, "launcher"), ({"transport": "ssh"}, "transport"), ({"shared_dir": "rel/dir"}, "shared_dir"),
    ({"rest_url": "ftp://x"}, "rest_url"), ({"processes_per_host": "0"}, "processes_per_host"),
    ({"sbatch_options": {"output": "/tmp/x"}}, "sbatch_options.output"),
    ({"sbatch_options": {"gres": "gpu:8 --wrap=rm"}}, "sbatch_options.gres"), ({"partition": "a b"}, "partition"),
    ({"hyperpod": "perhaps"}, "hyperpod"),
])
def test_settings_are_checked_by_the_backend_naming_the_field(tmp_path, settings, field):
    with pytest.raises(SpecError) as raised:
        get_backend("slurm", options={"shared_dir": str(tmp_path), **settings})
    assert field in {problem.path for problem in raised.value.problems}, raised.value


def test_a_handle_carries_where_the_cluster_is(tmp_path):
    chosen = get_backend("slurm", options={"shared_dir": str(tmp_path), "transport": "rest",
                                           "rest_url": "http://head:6820", "partition": "p"})
    handle = chosen.handle("bert-1")
    assert handle.location == {"rest_url": "http://head:6820", "shared_dir": str(tmp_path), "transport": "rest"}
    assert get_backend("slurm", **handle.location).location() == handle.location


def test_trainops_render_prints_the_batch_script_and_refuses_with_exit_2(spec, tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"name": "bert", "entry_point": "train.py", "source_dir": str(tmp_path),
                                "instance_type": "ml.p4d.24xlarge", "instance_count": 2}))
    command = [sys.executable, "-m", "trainops.cli", "render", str(path), "--backend", "slurm", "--job-name", "bert-1"]
    done = subprocess.run([*command, "-o", f"shared_dir={tmp_path / 'shared'}"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("#!/bin/bash\n#SBATCH --job-name=bert-1\n#SBATCH --nodes=2\n"), done.stdout
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "shared_dir" in refused.stderr, refused.stderr
    assert not Path(tmp_path / "shared").exists()


def test_a_pipelines_other_steps_run_here_over_the_shared_directory(tmp_path):
    """Staging, registration and the registry of a Slurm pipeline: the local backend's, on the shared directory."""
    shared = tmp_path / "shared"
    chosen = get_backend("slurm", options={"shared_dir": str(shared)})
    source = tmp_path / "raw"
    source.mkdir()
    (source / "part-0.csv").write_text("1,2\n")
    report = chosen.stage(str(source), str(shared / "fsx" / "digits"))
    assert (shared / "fsx" / "digits" / "part-0.csv").read_text() == "1,2\n" and report.to_dict()
    model = tmp_path / "model.tar.gz"
    with tarfile.open(model, "w:gz") as tar:
        tar.add(source / "part-0.csv", arcname="weights.csv")
    version = chosen.register(model_artifact=str(model), metrics={"accuracy": 0.97}, group="digits",
                              approval="Approved", job_name="digits-1")
    assert version.version == 1 and version.location.startswith(str(shared / "registry"))
    assert chosen.champion("digits").version == 1
    assert chosen.evaluation_output(str(shared), "digits-1").startswith(str(shared / "evaluations"))


@pytest.mark.parametrize("distribution", [{"type": "mpi", "processes_per_host": 2}, {"type": "pytorchddp"},
                                          {"type": "smddp", "launcher": "mpirun"}])
def test_mpirun_launch_plans_are_run_by_the_same_batch_script(tmp_path, distribution):
    """mpi, pytorchddp and SMDDP through mpirun: one task per node as for torchrun; mpirun on host algo-1 reaches the
    other nodes through the job's agent (the node script's, srun inside the job)."""
    (tmp_path / "train.py").write_text("")
    spec = parse_job_spec({"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "ml.p4d.24xlarge",
                           "instance_count": 2, "distribution": distribution})
    script = backend(tmp_path).render_request(spec, "mpi-1")
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks-per-node=1" in script
    assert 'srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1' in script


def test_the_mpi_agent_starts_the_daemon_on_its_hosts_node_inside_the_job(tmp_path):
    """mpirun's plm_rsh_agent: host algo-2 is node 2 of the step; the daemon's command as one shell line (as ssh
    would hand it on); that host's prepared environment over mpirun's, mpirun's PATH kept."""
    from trainops.backends.slurm import node

    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "job.json").write_text(json.dumps({"hosts": ["algo-1", "algo-2"]}))
    (tmp_path / "slurm" / "algo-2.env.json").write_text(json.dumps({"SM_CURRENT_HOST": "algo-2", "PATH": "/x"}))
    environ = {"SLURM_JOB_ID": "12", "SLURM_STEP_NODELIST": "gpu-[3-4]", "PATH": "/env/bin:/usr/bin",
               "SM_CURRENT_HOST": "algo-1"}
    argv, environment = node.agent_command(str(tmp_path), "algo-2", ["orted", "-mca", "ess", "env"], environ)
    assert argv[:6] == ["srun", "--overlap", "--whole", "--jobid=12", "--nodes=1", "--ntasks=1"]
    assert "--nodelist=gpu-4" in argv and argv[-3:] == ["/bin/sh", "-c", "orted -mca ess env"]
    assert "--mpi=none" in argv and "--cpu-bind=none" in argv  # Open MPI's daemon serves the ranks, unbound
    assert environment["SM_CURRENT_HOST"] == "algo-2" and environment["PATH"] == "/env/bin:/usr/bin"
    assert environment["TRAINOPS_SLURM_NODE"] == "gpu-4"
    with pytest.raises(SystemExit, match="algo-9"):
        node.agent_command(str(tmp_path), "algo-9", ["orted"], environ)
    with pytest.raises(SystemExit, match="no Slurm node for host algo-2"):
        node.agent_command(str(tmp_path), "algo-2", ["orted"], {"SLURM_STEP_NODELIST": "gpu-3"})
    settings = node.mpi_settings(str(tmp_path), {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"})
    assert settings == {"TRAINOPS_MPI_AGENT": str(tmp_path / "slurm" / "mpi-agent"),
                        "TRAINOPS_MPI_MEETING_DIR": str(tmp_path / "slurm" / "mpi" / "12.0")}


def test_the_laid_out_mpi_agent_is_one_executable_word_that_runs_the_node_scripts_agent(tmp_path):
    """The agent file as lay_out writes it (mode 0700, for Open MPI's plm_rsh_agent) reaches the node script's
    ``agent``: outside a Slurm step that refuses, naming the host it has no node for."""
    import os
    import shutil

    from trainops.backends.request.code import runtime_files
    from trainops.backends.slurm import layout, node
    from trainops.backends.slurm.script import NODE_FILE

    (tmp_path / "slurm").mkdir()
    layout._copy(runtime_files(), tmp_path / "runtime")  # as lay_out does: the node script reads through the runtime's
    shutil.copyfile(node.__file__, tmp_path / "runtime" / NODE_FILE)
    (tmp_path / "slurm" / "job.json").write_text(json.dumps({"hosts": ["algo-1", "algo-2"]}))
    layout._write_agent(tmp_path, sys.executable)
    agent = tmp_path / "slurm" / "mpi-agent"
    assert agent.stat().st_mode & 0o777 == 0o700
    ran = subprocess.run([str(agent), "algo-2", "orted"], capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ["PATH"]})
    assert ran.returncode != 0 and "no Slurm node for host algo-2" in ran.stderr
