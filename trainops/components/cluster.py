"""What a compiled pipeline needs from the Kubernetes cluster that runs it, set at compile time (kfp-kubernetes).

`ClusterSettings` holds the cluster's side of a run: the PersistentVolumeClaim every task mounts as the shared work
directory, the Kubernetes Secrets that give the train pod the job spec's masked environment values, and the image
pull policy and pull secrets. `configure(task, kind)` writes them into each task's platform config with
``kfp.kubernetes`` (the KFP way: the compiled YAML then carries them, and a cluster runs it as compiled).

`check_cluster` refuses, before anything is written, a compile that cannot run on a cluster as compiled:

- a pipeline whose backend runs its jobs in the pod (capability ``run_here``: the local backend's emulated hosts), or
  whose steps name ``${workdir}`` (the digits example's prepare writes ``${workdir}/raw``, which stage reads), hands
  data from step to step through its work directory, so every task must mount the same volume there: without
  ``--work-pvc`` each pod would write into its own filesystem and the next step find nothing;
- a masked environment value of the job spec (``HF_TOKEN``...: never in the YAML) without a Secret to take it from
  (``--secret-env NAME=SECRET:KEY``), or a ``--secret-env`` naming no masked value (a typo).

There is no service account here: KFP v2's compiled pipeline has no field for one (neither the pipeline spec nor
kfp-kubernetes 2.17's executor config has one); a run gets it when it is created (``service_account=`` of
``create_run_from_pipeline_package`` and ``create_recurring_run``, or the UI's run form). `SERVICE_ACCOUNT_WHERE`
says so when ``--service-account`` is given, which is refused rather than dropped; docs/kubeflow.md says how.

Function-local imports (CLI start): `trainops --help` imports this module for the kfp commands' parser; the spec's
models load when a command reads a pipeline file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainops.errors import Problem, SpecError

#: Where the work directory's volume is mounted by default: the image's TRAINOPS_HOME (the Dockerfile sets it).
DEFAULT_WORK_MOUNT = "/var/lib/trainops"
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
#: Why ``--service-account`` is refused, and where a service account is set instead.
SERVICE_ACCOUNT_WHERE = ("KFP v2's compiled pipeline has no field for a service account (a compile could only drop "
                         "it): set it when the run is created, kfp.Client().create_run_from_pipeline_package(..., "
                         "service_account=NAME) or create_recurring_run(..., service_account=NAME), or in the UI's "
                         "run form (without one, the run gets the cluster's default)")


@dataclass(frozen=True)
class SecretEnv:
    """An environment variable of the train pod taken from a key of a Kubernetes Secret."""

    name: str
    secret: str
    key: str

    @classmethod
    def parse(cls, text: str, field_name: str = "--secret-env") -> SecretEnv:
        """``NAME=SECRET:KEY`` (``NAME=SECRET`` takes the key named like the variable)."""
        name, _, source = text.partition("=")
        secret, _, key = source.partition(":")
        if not name.strip() or not secret.strip():
            raise SpecError(Problem(field_name, f"{text!r} is not NAME=SECRET:KEY (e.g. HF_TOKEN=hf-token:token)"))
        return cls(name.strip(), secret.strip(), (key or name).strip())


@dataclass(frozen=True)
class ClusterSettings:
    """The cluster's side of every task of a compiled pipeline.

    Attributes:
        work_pvc: a PersistentVolumeClaim mounted at `work_mount` in every task; the ``workdir`` parameter then
            defaults to `work_mount`, so the steps share their data, jobs and registry there.
        work_mount: where the claim is mounted (default the image's TRAINOPS_HOME).
        secret_env: masked environment values of the job spec, each from a Secret (on the tasks that read the spec).
        image_pull_policy: ``Always``, ``IfNotPresent`` or ``Never`` (None: the cluster's default).
        image_pull_secrets: Secrets holding the registry's credentials.
    """

    work_pvc: str | None = None
    work_mount: str = DEFAULT_WORK_MOUNT
    secret_env: tuple[SecretEnv, ...] = field(default_factory=tuple)
    image_pull_policy: str | None = None
    image_pull_secrets: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        problems = []
        if self.image_pull_policy is not None and self.image_pull_policy not in PULL_POLICIES:
            problems.append(Problem("--image-pull-policy", f"{self.image_pull_policy!r} is not one of "
                                                           f"{', '.join(PULL_POLICIES)}"))
        if not self.work_mount.startswith("/"):
            problems.append(Problem("--work-mount", f"{self.work_mount!r} is not an absolute path"))
        names = [entry.name for entry in self.secret_env]
        problems += [Problem("--secret-env", f"{name} is given twice") for name in sorted(set(names))
                     if names.count(name) > 1]
        if problems:
            raise SpecError(problems)

    @property
    def workdir(self) -> str | None:
        """The ``workdir`` parameter's default: the shared volume's mount path (None without a volume)."""
        return self.work_mount if self.work_pvc else None

    def configure(self, task: Any, kind: str) -> Any:
        """Write these settings into a task's platform config (``kind``: ``spec`` for a task that reads the job
        spec, whose masked values it needs; ``other``)."""
        import kfp.kubernetes as kubernetes  # kfp-kubernetes: missing, the command line names the extra (kfp)

        if self.work_pvc:
            kubernetes.mount_pvc(task, pvc_name=self.work_pvc, mount_path=self.work_mount)
        if kind == "spec":
            by_secret: dict[str, dict[str, str]] = {}
            for entry in self.secret_env:
                by_secret.setdefault(entry.secret, {})[entry.key] = entry.name
            for secret, keys in sorted(by_secret.items()):
                kubernetes.use_secret_as_env(task, secret_name=secret, secret_key_to_env=keys)
        if self.image_pull_policy:
            kubernetes.set_image_pull_policy(task, self.image_pull_policy)
        if self.image_pull_secrets:
            kubernetes.set_image_pull_secrets(task, list(self.image_pull_secrets))
        return task


def check_cluster(cluster: ClusterSettings, backend: str, masked: dict[str, str], where: str,
                  workdir_fields: tuple[str, ...] = ()) -> None:
    """Refuse what would not run on a cluster as compiled (`SpecError` naming each option, exit code 2).

    Args:
        backend: the pipeline's default backend.
        masked: the job spec's masked environment values, by name (what the train pod must get from Secrets).
        workdir_fields: the pipeline file's fields whose value names ``${workdir}`` (paths one step leaves for
            another in the work directory).
    """
    from trainops.backends import backend_class

    problems = []
    share = (f"give a PersistentVolumeClaim every task mounts there (--work-pvc NAME; mounted at "
             f"{cluster.work_mount}, --work-mount to change it)")
    if cluster.work_pvc:
        pass  # the steps share the claim
    elif backend_class(backend).RUNS_HERE:
        problems.append(Problem("--work-pvc", f"the {backend} backend runs its jobs in the train pod and hands data "
                                             "from step to step through the work directory, which every task must "
                                             f"share: {share}"))
    elif workdir_fields:
        problems.append(Problem("--work-pvc", f"{', '.join(workdir_fields)} name ${{workdir}}: one step leaves files "
                                             "there for another, and each pod has its own filesystem: " + share))
    given = {entry.name for entry in cluster.secret_env}
    problems += [Problem("--secret-env", f"{name} is masked in the job spec (the YAML never holds it): give the "
                                         f"Secret the train pod takes it from, --secret-env {name}=SECRET:KEY")
                 for name in sorted(set(masked) - given)]
    problems += [Problem("--secret-env", f"{name} is not a masked environment value of the job spec (those are: "
                                         f"{', '.join(sorted(masked)) or 'none'})")
                 for name in sorted(given - set(masked))]
    if problems:
        raise SpecError(problems, where)
