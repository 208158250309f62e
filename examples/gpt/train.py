"""Train the GPT example in whatever mode the job asks, through ``trainops.runtime``.

``init()`` joins the job (process group, device); ``transform(model)`` makes the model the job's: unchanged for one
process, DDP for data-parallel jobs (torch_distributed, mpi, smddp, pytorchddp), and for SMP jobs the SMP v2
parameters (FSDP2 ``hybrid_shard_degree``, DTensor ``tensor_parallel_degree``, activation offloading). The context
says which shard of the data this rank reads (``dp_rank`` of ``dp_size``). The same file runs as one process on a
laptop, under ``trainops run`` locally, under plain ``torchrun`` and on SageMaker.
"""

import torch
from loop import build_model, parser, train

import trainops.runtime


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    ctx = trainops.runtime.init()
    model = build_model(args, torch.device("cpu"))
    # On GPUs the loop computes in bf16 (autocast); sharded (FSDP2) models then gather bf16 parameters too.
    # --ddp-bucket-mb overrides transform()'s DDP bucket size (the benchmark compares sizes with it).
    ddp_options = {"bucket_cap_mb": args.ddp_bucket_mb} if args.ddp_bucket_mb else None
    model = trainops.runtime.transform(model, activation_checkpointing=args.activation_checkpointing,
                                       mixed_precision="bf16" if ctx.device.type == "cuda" else None,
                                       ddp_options=ddp_options)
    train(model, args, ctx.device, ctx.dp_rank, ctx.dp_size, local_rank=ctx.local_rank, model_dir=ctx.model_dir,
          mode=f"trainops:{ctx.distribution.get('type', 'none')}",
          extra={"tp_size": ctx.tp_size, "parameters_config": ctx.distribution.get("parameters")})
    trainops.runtime.cleanup()


if __name__ == "__main__":
    main()
