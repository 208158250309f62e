"""transform(): one process, refusals, activation wrapping, and the hand-over to the SMP library on SageMaker."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn as nn

import trainops.runtime.context as context_module
from trainops.runtime import RuntimeContext, transform
from trainops.runtime.smp_native import ParallelismError


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 6)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def one_process(distribution=None) -> RuntimeContext:
    return RuntimeContext(device=torch.device("cpu"), distribution=distribution or {"type": "none"})


def test_transform_before_init_says_what_to_do(monkeypatch):
    monkeypatch.setattr(context_module, "_CURRENT", None)
    with pytest.raises(RuntimeError, match=r"call trainops.runtime.init\(\) first"):
        transform(Model())


def test_transform_uses_the_context_init_returned(monkeypatch):
    context = one_process({"type": "torch_distributed"})
    monkeypatch.setattr(context_module, "_CURRENT", context)
    model = Model()
    assert transform(model) is model


@pytest.mark.parametrize("kind", ["none", "torch_distributed", "mpi", "smddp", "pytorchddp", "pytorchxla"])
def test_one_process_keeps_the_model(kind):
    model = Model()
    assert transform(model, context=one_process({"type": kind})) is model


def test_smp_on_one_process_keeps_the_model_and_honours_the_seed():
    model = Model()
    context = one_process({"type": "smp", "launcher": "torchrun", "parameters": {"random_seed": 11}})
    assert transform(model, context=context) is model
    drawn = torch.rand(3)
    torch.manual_seed(11)
    assert torch.equal(drawn, torch.rand(3))


@pytest.mark.parametrize("kind", ["parameter_server", "multi_worker_mirrored_strategy"])
def test_tensorflow_strategies_are_refused(kind):
    with pytest.raises(ParallelismError, match=f"{kind} is a TensorFlow / MXNet strategy"):
        transform(Model(), context=one_process({"type": kind}))


def test_smp_v1_is_refused():
    context = one_process({"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 2}})
    with pytest.raises(ParallelismError, match="SMP v1"):
        transform(Model(), context=context)


def test_smp_parameters_it_cannot_honour_are_refused_before_anything_runs():
    context = one_process({"type": "smp", "launcher": "torchrun", "parameters": {"context_parallel_degree": 2}})
    with pytest.raises(ParallelismError, match="context_parallel_degree=2"):
        transform(Model(), context=context)


@pytest.mark.parametrize("distribution, keyword, wrapper", [
    ({"type": "none"}, {"activation_checkpointing": True}, "CheckpointWrapper"),
    ({"type": "smp", "launcher": "torchrun", "parameters": {"sm_activation_offloading": True}}, {}, "OffloadWrapper"),
])
def test_activation_wrapping_keeps_the_numbers(distribution, keyword, wrapper):
    torch.manual_seed(0)
    reference = Model()
    model = Model()
    model.load_state_dict(reference.state_dict())
    result = transform(model, context=one_process(distribution), **keyword)
    assert [type(block).__name__ for block in result.blocks] == [wrapper, wrapper]
    x = torch.randn(4, 6)
    assert torch.allclose(reference(x), result(x))


def test_on_sagemaker_the_smp_library_takes_over(monkeypatch):
    calls = []
    library = types.ModuleType("torch.sagemaker")
    library.__spec__ = types.SimpleNamespace(origin="/opt/conda/lib/python3.11/site-packages/torch/sagemaker")
    library.init = lambda *args, **kwargs: calls.append("init")
    library.transform = lambda model: calls.append("transform") or model

    class RecordingFSDP:
        def __init__(self, module, **options):
            calls.append("fsdp")
            self.module, self.options = module, options

    import torch.distributed.fsdp as fsdp

    import trainops.runtime.parallel as parallel

    monkeypatch.setitem(sys.modules, "torch.sagemaker", library)
    monkeypatch.setattr(fsdp, "FullyShardedDataParallel", RecordingFSDP)
    monkeypatch.setattr(parallel, "_smp_library_initialised", False)
    monkeypatch.delenv("TRAINOPS_LOCAL", raising=False)
    context = one_process({"type": "smp", "launcher": "torchrun", "parameters": {"hybrid_shard_degree": 8}})
    model = Model()
    wrapped = transform(model, context=context)
    assert calls == ["init", "transform", "fsdp"]
    assert wrapped.module is model and wrapped.options["use_orig_params"] is True
    # Locally the native mapping is used even where a torch.sagemaker module is importable.
    monkeypatch.setenv("TRAINOPS_LOCAL", "1")
    calls.clear()
    local = one_process({"type": "smp", "launcher": "torchrun", "parameters": {}})
    model = Model()
    assert transform(model, context=local) is model and calls == []


def test_the_new_runtime_modules_import_neither_torch_nor_pydantic():
    import subprocess

    code = ("import sys\n"
            "import trainops.runtime, trainops.runtime.parallel, trainops.runtime.smp_native\n"
            "import trainops.runtime.tensor_parallel, trainops.runtime.healthcheck, trainops.runtime.shims\n"
            "print(sorted(name for name in ('torch', 'pydantic', 'numpy') if name in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.fixture
def one_rank_group(tmp_path):
    """A real gloo process group of one rank, so DistributedDataParallel can be built in this process."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def data_parallel_context() -> RuntimeContext:
    # world_size 2 is what makes transform() build DDP; the group itself has one rank (DDP only needs one).
    return RuntimeContext(device=torch.device("cpu"), distribution={"type": "torch_distributed"}, world_size=2,
                          backend="gloo")


def test_ddp_gets_bucket_views_and_100_mb_buckets(one_rank_group):
    """Issue 18: between hosts, 100 MB buckets (fewer graph splits under torch.compile) and gradients that are
    bucket views."""
    wrapped = transform(Model(), context=data_parallel_context())
    assert type(wrapped).__name__ == "DistributedDataParallel"
    assert wrapped.gradient_as_bucket_view is True
    assert wrapped.bucket_bytes_cap == 100 * 1024 * 1024
    x = torch.randn(4, 6)
    wrapped(x).sum().backward()
    for parameter in wrapped.parameters():
        assert parameter.grad is not None


def test_ddp_on_one_host_gets_400_mb_buckets(one_rank_group):
    """Issue 18: with every rank on one host the last bucket's all-reduce is short, so fewer, larger buckets (fewer
    graph splits under torch.compile) win; between hosts the 100 MB above stays."""
    context = data_parallel_context()
    context.local_world_size = 2
    wrapped = transform(Model(), context=context)
    assert wrapped.bucket_bytes_cap == 400 * 1024 * 1024
    assert wrapped.gradient_as_bucket_view is True
    overridden = transform(Model(), context=context, ddp_options={"bucket_cap_mb": 50})
    assert overridden.bucket_bytes_cap == 50 * 1024 * 1024


def test_ddp_options_override_the_defaults(one_rank_group):
    wrapped = transform(Model(), context=data_parallel_context(),
                        ddp_options={"bucket_cap_mb": 25, "gradient_as_bucket_view": False, "static_graph": True})
    assert wrapped.bucket_bytes_cap == 25 * 1024 * 1024
    assert wrapped.gradient_as_bucket_view is False
    assert wrapped.static_graph is True


def test_an_unknown_mixed_precision_is_refused_before_anything_runs():
    model = Model()
    with pytest.raises(ParallelismError, match=r"mixed_precision='bfloat16'.*bf16, fp16"):
        transform(model, context=one_process({"type": "smp", "parameters": {}}), mixed_precision="bfloat16")


def test_fsdp2_gets_the_mixed_precision_policy_and_keeps_the_last_block_gathered(monkeypatch):
    """FSDP2's calls recorded (one process cannot run a 2-rank mesh): bf16 parameters with float32 reduction on every
    block and the root, and no reshard after forward for the last block, which backward needs first."""
    import torch.distributed.device_mesh as device_mesh
    import torch.distributed.fsdp as fsdp

    from trainops.runtime import tensor_parallel
    from trainops.runtime.smp_native import Layout, SMPConfig, apply_smp

    calls = []

    class Mesh:
        def __getitem__(self, names):
            return ("mesh", names)

    monkeypatch.setattr(device_mesh, "init_device_mesh", lambda *args, **kwargs: Mesh())
    monkeypatch.setattr(tensor_parallel, "broadcast_module", lambda module, source: None)
    monkeypatch.setattr(fsdp, "fully_shard", lambda module, **options: calls.append((module, options)))
    model = Model()
    apply_smp(model, SMPConfig(), Layout(world_size=2, replicate=1, shard=2, tp=1), "cpu", mixed_precision="bf16")
    assert [module for module, _ in calls] == [model.blocks[0], model.blocks[1], model]
    for _, options in calls:
        assert options["mp_policy"].param_dtype is torch.bfloat16
        assert options["mp_policy"].reduce_dtype is torch.float32
        assert options["mesh"] == ("mesh", "shard")  # one replica: plain FSDP, not HSDP over a replica of one
    assert [options.get("reshard_after_forward", True) for _, options in calls] == [True, False, True]
    calls.clear()
    apply_smp(Model(), SMPConfig(), Layout(world_size=4, replicate=2, shard=2, tp=1), "cpu")
    assert all(options["mp_policy"].param_dtype is None for _, options in calls)
    assert all(options["mesh"] == ("mesh", ("replicate", "shard")) for _, options in calls)
