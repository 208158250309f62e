"""The slurm backend: a training job as one Slurm batch job (SageMaker HyperPod's Slurm clusters included).

The job spec becomes the CreateTrainingJob request the other backends render, laid out as one contract directory
per host under a directory every node sees (``shared_dir``; on HyperPod the FSx for Lustre mount). The batch script
(`script`) asks for one task per node and starts, with ``srun``, the trainops runtime on every node (`node`, a
standard-library file uploaded with the runtime): node ``i`` is host ``algo-<i+1>``, so every rank sees the
SageMaker container contract. The job reaches Slurm through its commands (``transport: cli``) or slurmrestd
(``transport: rest``); its record stays in the shared directory (`records`), so its status outlives Slurm's memory.

Imported only through the registry (`trainops.backends`): nothing here is loaded by a local or SageMaker run.
"""

from trainops.backends.slurm import vocabulary as vocabulary  # noqa: E402 - registers Slurm's status tables
