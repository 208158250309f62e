"""The local stand-ins for SMDDP (torch_smddp) and SMP v2 (torch.sagemaker): when they are served, what they do,
and that a real library always wins. Anything that imports a stand-in runs in a fresh interpreter (it registers a
process-group backend and fills sys.modules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from trainops.runtime import shims


def clean_environment(**extra: str) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("SM_", "TRAINOPS_", "OMPI_")) and key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    environ.update({"CUDA_VISIBLE_DEVICES": "", **extra})
    return environ


def python(code: str, tmp_path, **environ: str) -> subprocess.CompletedProcess:
    environ.setdefault("TRAINOPS_BASE_DIR", str(tmp_path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=clean_environment(**environ), cwd=str(tmp_path), timeout=180)


@pytest.mark.parametrize("environ, expected", [
    ({}, False),                                            # SageMaker: never
    ({"TRAINOPS_LOCAL": "1"}, True),
    ({"TRAINOPS_LOCAL": "1", "TRAINOPS_SHIMS": "0"}, False),
    ({"TRAINOPS_LOCAL": "1", "TRAINOPS_SHIMS": "false"}, False),
    ({"TRAINOPS_LOCAL": "1", "TRAINOPS_SHIMS": "1"}, True),
    ({"TRAINOPS_LOCAL": "0"}, False),
    ({"TRAINOPS_SHIMS": "1"}, True),                        # a Slurm run: the slurm backend asks for them
    ({"TRAINOPS_SHIMS": "0"}, False),
])
def test_served_only_in_local_and_slurm_runs_that_did_not_opt_out(environ, expected):
    assert shims.enabled(environ) is expected


def test_install_is_idempotent_and_last_on_the_path():
    shims.uninstall()
    try:
        assert shims.install({}) is False and not shims.installed()
        assert shims.install({"TRAINOPS_LOCAL": "1"}) is True
        assert shims.install({"TRAINOPS_LOCAL": "1"}) is True
        assert sum(isinstance(finder, shims.ShimFinder) for finder in sys.meta_path) == 1
        assert isinstance(sys.meta_path[-1], shims.ShimFinder)
        assert shims.is_shim("smdistributed.dataparallel.torch.torch_smddp")
        assert not shims.is_real("smdistributed.dataparallel.torch.torch_smddp")
    finally:
        shims.uninstall()
    assert not shims.installed()
    assert not shims.is_real("smdistributed.dataparallel.torch.torch_smddp")


def test_smddp_script_lines_run_on_the_stand_in(tmp_path):
    result = python("""
        import os, json
        from trainops.runtime import shims
        shims.install()
        import smdistributed.dataparallel.torch.torch_smddp
        import smdistributed.dataparallel.torch.torch_smddp  # a second import says nothing more
        import torch, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="0", RANK="0", WORLD_SIZE="1")
        store = dist.FileStore(os.path.join(os.getcwd(), "store"), 1)
        dist.init_process_group(backend="smddp", store=store, rank=0, world_size=1)
        value = torch.ones(3)
        dist.all_reduce(value)
        print(json.dumps({"backend": dist.get_backend(), "sum": value.tolist(),
                          "shim": shims.is_shim("smdistributed.dataparallel.torch.torch_smddp")}))
        dist.destroy_process_group()
    """, tmp_path, TRAINOPS_LOCAL="1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"backend": "smddp", "sum": [1.0, 1.0, 1.0], "shim": True}
    notices = [line for line in result.stderr.splitlines() if "stand-in" in line]
    assert notices == ["trainops: local run without the SMDDP library: smdistributed.dataparallel.torch.torch_smddp "
                       "is trainops' stand-in; the process-group backend 'smddp' runs on gloo"]


def test_a_real_library_always_wins(tmp_path):
    package = tmp_path / "site" / "smdistributed" / "dataparallel" / "torch"
    package.mkdir(parents=True)
    for directory in (package.parent.parent, package.parent, package):
        (directory / "__init__.py").write_text("")
    (package / "torch_smddp.py").write_text("REAL = True\n")
    result = python("""
        from trainops.runtime import shims
        shims.install()
        import smdistributed.dataparallel.torch.torch_smddp as module
        print(module.REAL, shims.is_real("smdistributed.dataparallel.torch.torch_smddp"))
    """, tmp_path, TRAINOPS_LOCAL="1", PYTHONPATH=str(tmp_path / "site"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]
    assert "stand-in" not in result.stderr


def test_the_rank_wrapper_serves_them_and_the_opt_out_removes_them(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import smdistributed.dataparallel.torch.torch_smddp\nprint('imported')\n")
    command = [sys.executable, "-m", "trainops.runtime.rank", str(script)]
    served = subprocess.run(command, capture_output=True, text=True, timeout=180,
                            env=clean_environment(TRAINOPS_LOCAL="1"))
    assert served.returncode == 0, served.stderr
    assert "imported" in served.stdout
    refused = subprocess.run(command, capture_output=True, text=True, timeout=180,
                             env=clean_environment(TRAINOPS_LOCAL="1", TRAINOPS_SHIMS="0"))
    assert refused.returncode == 1
    assert "ModuleNotFoundError: No module named 'smdistributed'" in refused.stderr
    on_sagemaker = subprocess.run(command, capture_output=True, text=True, timeout=180, env=clean_environment())
    assert on_sagemaker.returncode == 1 and "No module named 'smdistributed'" in on_sagemaker.stderr


def test_init_does_not_take_the_stand_in_for_the_library(tmp_path):
    result = python("""
        from trainops.runtime import shims
        shims.install()
        import trainops.runtime as runtime
        context = runtime.init()
        print(context.device)
    """, tmp_path, TRAINOPS_LOCAL="1", TRAINOPS_DISTRIBUTION='{"type": "smddp"}')
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "SMDDP" in line]
    assert lines == ["trainops: the SMDDP library is not installed here: using the gloo backend instead of smddp"]


def test_torch_sagemaker_stand_in_state_and_transform(tmp_path):
    result = python("""
        import json, torch
        from trainops.runtime import shims
        shims.install()
        import torch.sagemaker as tsm
        tsm.init()
        model = torch.nn.Sequential(torch.nn.Linear(2, 2))
        same = tsm.transform(model, dtype=torch.float64) is not None
        state = {name: getattr(tsm.state, name) for name in
                 ("rank", "world_size", "local_rank", "dp_rank", "dp_size", "tp_rank", "tp_size")}
        print(json.dumps({"state": state, "dtype": str(next(model.parameters()).dtype), "ok": same,
                          "shim": shims.is_shim("torch.sagemaker")}))
        try:
            tsm.init({"tensor_parallel_degree": 2})
        except Exception as error:
            print(type(error).__name__, error)
    """, tmp_path, TRAINOPS_LOCAL="1")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.strip().splitlines()
    report = json.loads(first)
    assert report["state"] == {"rank": 0, "world_size": 1, "local_rank": 0, "dp_rank": 0, "dp_size": 1, "tp_rank": 0,
                               "tp_size": 1}
    assert report["shim"] and report["ok"] and report["dtype"] == "torch.float64"
    assert second.startswith("ParallelismError SMP parameter tensor_parallel_degree=2 must divide the number of "
                             "ranks (1)")
    assert sum("torch.sagemaker is trainops' stand-in" in line for line in result.stderr.splitlines()) == 1
