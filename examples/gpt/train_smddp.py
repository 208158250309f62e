"""The GPT example as a script written for SageMaker's SMDDP library, with nothing of trainops in it.

On SageMaker the import below registers SMDDP's ``smddp`` backend. In a local trainops run (``trainops run
jobs/smddp.yaml``) the library is absent and trainops serves a stand-in under the same name (gloo on CPU, NCCL on
GPUs), so this file runs unchanged.
"""

import os

import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401 - registers the smddp backend
import torch
import torch.distributed as dist
from loop import build_model, parser, train
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    dist.init_process_group(backend="smddp")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    model = build_model(args, device)
    model = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    train(model, args, device, dist.get_rank(), dist.get_world_size(), local_rank=local_rank,
          model_dir=os.environ.get("SM_MODEL_DIR", "."), mode="smddp-script")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
