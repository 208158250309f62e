"""The GPT example as a script written for SageMaker's model parallelism library v2 (``torch.sagemaker``), with
nothing of trainops in it.

On SageMaker's SMP v2 images ``torch.sagemaker`` is the library. In a local trainops run (``trainops run
jobs/tsm.yaml``) trainops serves a stand-in that maps the job's SMP v2 parameters onto FSDP2 and DTensor tensor
parallelism; note that its ``transform`` also shards the model (with the library the script would wrap it in FSDP
itself).
"""

import os

import torch
import torch.sagemaker as tsm
from loop import build_model, parser, train


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    tsm.init()
    model = build_model(args, torch.device("cpu"))
    model = tsm.transform(model)
    device = next(model.parameters()).device
    train(model, args, device, tsm.state.dp_rank, tsm.state.dp_size, local_rank=tsm.state.local_rank,
          model_dir=os.environ.get("SM_MODEL_DIR", "."), mode="tsm-script",
          extra={"tp_size": tsm.state.tp_size, "tp_rank_of_rank0": tsm.state.tp_rank})
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
