"""An emulated SageMaker training container on this machine: one host's contract directory, filled from the request
(`trainops.backends.hostfs.contract_dir`), run in isolation where this machine allows it.

Where the container sees /opt/ml and the host names algo-1..N: when this machine allows a private mount namespace
(root, or a user namespace: `isolation`, with a PID namespace too wherever the kernel allows one, `host_init`), each
host runs in its own, with its base directory bind-mounted on
/opt/ml and an /etc/hosts naming every algo-N as 127.0.0.1, which is what Docker does for SageMaker local mode and
what AWS's toolkit assumes (it has /opt/ml paths of its own and addresses hosts by name). Without one the container
gets `SAGEMAKER_BASE_DIR` (honoured by the trainops runtime and by the toolkit's environment module), /opt/ml in the
request's Environment values rewritten to the base directory, and the trainops runtime finds the hosts through
TRAINOPS_HOST_ADDRESSES; the toolkit launcher then refuses to start (it would resolve algo-N through DNS).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.contract_dir import to_host
from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.hostfs.safe_fs import write_atomically
from trainops.backends.local import host_init
from trainops.errors import Problem, SpecError
from trainops.runtime.output_relay import MASK_VARIABLES, secret_values
from trainops.spec.base import looks_secret

TOOLKIT_DISABLED = "TRAINOPS_LOCAL_NAMESPACE"  # 0: never use a mount namespace (tests of the fallback)
#: 0: no PID namespace per host (debugging); user: the user-namespace variant even where plain namespaces work
PID_NAMESPACE_SETTING = "TRAINOPS_LOCAL_PID_NAMESPACE"

logger = logging.getLogger(__name__)


#: Where trainops finds the host's own tools (unshare, sh, mount): after the directory of the Python running
#: trainops, these, never the PATH of the job's environment (a spec's PATH must not choose what runs as the host).
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def host_tool(name: str) -> str | None:
    """The absolute path of the host tool ``name`` from trainops' own environment (`SAFE_PATH` after the directory
    of `sys.executable`), or None when there is none."""
    import sys

    return shutil.which(name, path=os.pathsep.join([os.path.dirname(sys.executable), SAFE_PATH]))


#: How an emulated host is isolated, strongest first (`isolation`): a PID and a mount namespace made directly (root,
#: CAP_SYS_ADMIN), the same inside a user namespace of the host's own (an unprivileged user, where the kernel allows
#: user namespaces), then a mount namespace alone (PID namespaces turned off) either way. None: no namespace at all.
#: Every variant, None included, is started by `host_init` (its launcher holds the job's locks until the host ended).
PID_ISOLATIONS = ("pid", "user-pid")
ISOLATIONS = (*PID_ISOLATIONS, "mount", "user-mount")
# What the host's mount script does, tried once: a tmpfs, a bind mount and a read-only remount of it.
_MOUNT_PROBE = ('set -e; d=$(mktemp -d); mkdir "$d/a" "$d/b"; mount --bind "$d/a" "$d/b"; '
                'mount -o remount,bind,ro "$d/b"; umount "$d/b"; mount -t tmpfs trainops-probe "$d/a"; '
                'umount "$d/a"; rm -r "$d"')


def image_tool(name: str, python: str) -> str | None:
    """The absolute path of the image's tool ``name`` (mpirun) for a local host: next to the image's Python (a venv
    or conda environment's own Open MPI), then on the PATH trainops itself runs with, then `SAFE_PATH`; never on
    the job's `PATH` (the request's Environment). None when there is none. The container's processes still see the
    PATH the job asks for; only what trainops' runtime starts as the image's tool is chosen here."""
    search = [os.path.dirname(python), os.environ.get("PATH", ""), SAFE_PATH]
    return shutil.which(name, path=os.pathsep.join(entry for entry in search if entry))


def choose_isolation(works: Callable[[str], bool], environ: Mapping[str, str]) -> str | None:
    """The first variant of `ISOLATIONS` that `works` on this machine, or None (the fallback): none at all with
    TRAINOPS_LOCAL_NAMESPACE=0, no PID namespace with TRAINOPS_LOCAL_PID_NAMESPACE=0, only user namespaces with
    TRAINOPS_LOCAL_PID_NAMESPACE=user (what an unprivileged user gets, tried by root)."""
    if environ.get(TOOLKIT_DISABLED) == "0":
        return None
    setting = environ.get(PID_NAMESPACE_SETTING, "").strip().lower()
    candidates = {"0": ("mount", "user-mount"), "user": ("user-pid", "user-mount")}.get(setting, ISOLATIONS)
    return next((variant for variant in candidates if works(variant)), None)


def isolation_works(variant: str) -> bool:
    """Whether a host isolated as `variant` starts here: the very launcher of that variant, tried with a probe of
    the mounts a host makes (a refused `unshare`, a refused mount of /proc or a bind mount all answer no)."""
    shell = host_tool("sh")
    return shell is not None and host_init.works(variant, [shell, "-c", _MOUNT_PROBE], {"PATH": SAFE_PATH})


@functools.lru_cache(maxsize=1)


def isolation() -> str | None:
    """How this machine isolates each emulated host (`ISOLATIONS`), asked once per process."""
    return choose_isolation(isolation_works, os.environ)


def namespaces_available() -> bool:
    """Whether each emulated host gets a private mount namespace (/opt/ml, the algo-N names), whichever variant."""
    return isolation() is not None


def pid_namespaces_available() -> bool:
    """Whether each emulated host is a PID namespace of its own too (`trainops.backends.local.host_init`): every
    process of the host ends with it or with its controller, by the kernel. Inside, pids are the host's own, as in
    a container; `trainops status` lists each rank's pid on this machine (`rank_pids`)."""
    return isolation() in PID_ISOLATIONS


# Runs as the container's first process inside its own mount namespace, then execs the entrypoint (same pid):
# /opt/ml becomes this host's base directory (a tmpfs on /opt when /opt/ml does not exist, with /opt's own entries
# bound back so an interpreter installed there still runs), /etc/hosts names every emulated host. The entrypoint is
# exec'd through `host_init.py without-mounts`, which takes CAP_SYS_ADMIN away first: a rank running as root cannot
# remount its read-only channels writable.
_NAMESPACE_SCRIPT = r"""set -e
base=$1; hosts=$2; keep=$3; tools=$4; mounts=$5; python=$6; launcher=$7; shift 7
container_path=${PATH-}; PATH=$tools
if [ ! -d /opt/ml ]; then
  mount --bind /opt "$keep"
  mount -t tmpfs -o mode=755 trainops-opt /opt
  for entry in "$keep"/* "$keep"/.[!.]*; do
    [ -e "$entry" ] || continue
    name=${entry##*/}
    if [ -d "$entry" ]; then mkdir "/opt/$name"; else : > "/opt/$name"; fi
    mount --bind "$entry" "/opt/$name"
  done
  mkdir /opt/ml
fi
mount --bind "$base" /opt/ml
tab=$(printf '\t')
while IFS=$tab read -r mode source target; do
  [ -n "$target" ] || continue
  mount --bind "$source" "/opt/ml/$target"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "/opt/ml/$target"; fi
done < "$mounts"
mount --bind "$hosts" /etc/hosts
PATH=$container_path
exec "$python" -I -S "$launcher" without-mounts "$@"
"""


def isolate(argv: list[str], layout: HostLayout, job_dir: Path, hosts: list[str]) -> list[str]:
    """`argv`, the container's entrypoint, as its host's launcher starts it (`host_init`, in the variant this machine
    allows): in a mount namespace of its own through the mount script (see the module docstring), or, with no
    namespace, with the /opt/ml paths it names turned into the host's base directory."""
    namespace = job_dir / "namespace"
    namespace.mkdir(parents=True, exist_ok=True)
    variant = isolation()
    launcher = [sys.executable, "-I", "-S", os.path.abspath(host_init.__file__), variant or "none",
                str(init_report(job_dir, layout.name))]
    if variant is None:
        return [*launcher, *(to_host(part, layout.base_dir) for part in argv)]
    keep = namespace / f"opt-{layout.name}"
    keep.mkdir(exist_ok=True)

    hosts_file = namespace / "hosts"
    if not os.path.isfile(hosts_file) or os.path.islink(hosts_file):  # an earlier run's host could have left one
        try:
            original = Path("/etc/hosts").read_text(encoding="utf-8")  # root's: outside any job's reach
        except OSError:
            original = "127.0.0.1 localhost\n"
        names = "".join(f"127.0.0.1\t{host}\n" for host in hosts)
        write_atomically(hosts_file, (original.rstrip("\n") + "\n# emulated SageMaker hosts (trainops)\n"
                                      + names).encode("utf-8"), 0o644)
    shell = host_tool("sh")
    if not shell:
        raise SpecError(Problem("isolation", f"sh is not on this machine (looked in {SAFE_PATH}): install a shell, "
                                             "or set TRAINOPS_LOCAL_NAMESPACE=0"), source="local host")
    mounts = namespace / f"mounts-{layout.name}"
    write_atomically(mounts, "".join(f"{'ro' if readonly else 'rw'}\t{source}\t{target}\n"
                                     for source, target, readonly in layout.mounts).encode("utf-8"), 0o644)
    return [*launcher, shell, "-c", _NAMESPACE_SCRIPT, "trainops-container", str(layout.base_dir), str(hosts_file),
            str(keep), SAFE_PATH, str(mounts), sys.executable, os.path.abspath(host_init.__file__), *argv]


def init_report(job_dir: Path, host: str) -> Path:
    """Where a host's init (`host_init`) says how its launcher ended and how many processes it stopped after."""
    return job_dir / "namespace" / f"{host}.init"


def request_secrets(request: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The values never written as they are: those of the request's Environment (and this machine's) named in
    TRAINOPS_MASK_VARIABLES, plus every request Environment value whose name looks like a secret."""
    environment = dict(request.get("Environment") or {})
    combined = {**environ, **environment}
    names = {name for name in f"{environ.get(MASK_VARIABLES, '')},{environment.get(MASK_VARIABLES, '')}".split(",")
             if name.strip()} | {name for name in environment if looks_secret(name)}
    combined[MASK_VARIABLES] = ",".join(sorted(names))
    return secret_values(combined)
