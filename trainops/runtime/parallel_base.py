"""What the script helpers share (`parallel`, `smp_native`, `tensor_parallel`): their error and DDP's defaults.

A module of its own so that those helpers import it instead of each other: the SMP mapping needs DDP's defaults and
the tensor-parallel split needs the error, while `parallel.transform` needs both of them.
"""

from __future__ import annotations

from typing import Any


class ParallelismError(ValueError):
    """A distribution or SMP parameter that the native mapping cannot honour; the message names it and says why."""


#: What transform() gives DistributedDataParallel beyond its defaults (issue 18, bench/README.md has the figures):
#: gradients that are views of the communication buckets (no copy into and out of a bucket each step, one gradient's
#: memory less), and larger buckets than DDP's 25 MB. Under ``torch.compile`` Dynamo splits the graph at every bucket
#: boundary so that each all-reduce can start while backward goes on; 25 MB buckets cut a 255 M-parameter GPT into 29
#: graphs, and every split costs compute time. The last bucket's all-reduce is what no backward can hide, so the size
#: depends on the link: between hosts (EFA) 100 MB (10 graphs; 0.92 -> 0.94-0.95 scaling on 2 x H200), inside one
#: host (NVLink, ~300 GB/s) :data:`parallel.SINGLE_HOST_BUCKET_MB` (3 graphs, 0.66 ms of exposed all-reduce: 0.96
#: against 0.94 for 100 MB in the same run). ``ddp_options`` overrides either.
DDP_DEFAULTS: dict[str, Any] = {"gradient_as_bucket_view": True, "bucket_cap_mb": 100}
