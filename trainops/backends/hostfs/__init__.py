"""What the backends whose jobs live in directories share: the local backend (this machine's state root) and the
slurm backend (a directory every node sees) lay out, write, lock and read a job's files the same way.

Neutral, like `trainops.backends.request`: no concrete backend is imported here, and both import it. It holds the
state root's checks and link-safe file helpers (`paths`, `safe_fs`, `locks`) and staging: a local tree, ``file://``
or ``s3://`` prefix copied into a directory, every hostile name refused (`staging` and its `stage_*` modules; an S3
channel of a job is downloaded through it too), and the request's contract directory per host: its config files and
channels (`contract_dir`, `channels`, `layout`), where its code comes from (`inputs`) and how its model is packed
(`artifacts`).
"""
