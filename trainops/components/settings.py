"""Where the KFP components run: their image, and how the component's Python starts in it.

Two kinds of component, chosen at compile time:

- **containerized** (the default): the image already holds trainops and everything the components need (the image
  the repository's ``Dockerfile`` builds, ``trainops:<version>`` unless ``--image`` names another). The container's
  command is ``python3 -m trainops.components.executor --executor_input ... --function_to_execute <name>``: Python
  is the container's first process (no shell in between, so a pod deletion's SIGTERM reaches the component's
  handler), the function is the installed one (nothing copied into the YAML) and nothing is installed at run time.
- **lightweight**, only when packages are named (``--package``): KFP's own form, where the function's source travels
  in the YAML and pip installs the packages when the component starts (``python:3.11-slim`` unless ``--image``).
  trainops rewrites KFP's start script so that each shell ``exec``s the next step, and Python still ends up as the
  container's first process. `LOCAL_SETTINGS` (``kfp.local``'s SubprocessRunner, nothing installed) is lightweight
  too, because kfp.local runs lightweight components only.

kfp's own package is never injected (``install_kfp_package=False``): the image carries kfp through ``trainops[kfp]``,
and kfp would otherwise add a ``pip install kfp==...`` line to every component, which fails offline.

This module imports no kfp: the command line reads it to build its options.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops import __version__
from trainops.backends import backend_class
from trainops.errors import Problem, SpecError

#: The image the repository's Dockerfile builds, tagged with this version (``docker build -t trainops:0.1.0 .``);
#: push it to a registry the cluster pulls from and pass that name with ``--image``.
DEFAULT_IMAGE = f"trainops:{__version__}"
#: The Dockerfile's WORKDIR: the build context's pipeline files (examples/, PIPELINE_DIR) lie below it in the image.
IMAGE_WORKDIR = "/opt/trainops"
#: The base of lightweight components: a Python that matches what trainops supports, with pip.
LIGHTWEIGHT_BASE_IMAGE = "python:3.11-slim"
#: The module a containerized component runs (`trainops.components.executor`).
EXECUTOR_COMMAND = ("python3", "-m", "trainops.components.executor")
#: Kept for callers of the lightweight form: the requirement that installs this very trainops.
DEFAULT_PACKAGE = f"trainops[aws,kfp]=={__version__}"


@dataclass(frozen=True)
class ComponentSettings:
    """How every trainops component is built.

    Attributes:
        base_image: the container image each component runs in.
        packages_to_install: pip requirements installed before a lightweight component's function runs.
        pip_index_urls: package indexes for those requirements (empty: pip's default).
        containerized: run the installed component functions with `EXECUTOR_COMMAND` (nothing installed, nothing
            embedded); False for KFP's lightweight form.
    """

    base_image: str = DEFAULT_IMAGE
    packages_to_install: tuple[str, ...] = ()
    pip_index_urls: tuple[str, ...] = field(default_factory=tuple)
    containerized: bool = True

    def __post_init__(self) -> None:
        if self.containerized and self.packages_to_install:
            raise ValueError("a containerized component installs nothing: its image holds what it needs "
                             "(use containerized=False to install packages at start-up)")

    def component_options(self) -> dict:
        """The keyword arguments of ``kfp.dsl.component`` these settings stand for."""
        options = {
            "base_image": self.base_image,
            "packages_to_install": list(self.packages_to_install),
            "pip_index_urls": list(self.pip_index_urls) or None,
            "install_kfp_package": False,
        }
        if self.containerized:
            options["target_image"] = self.base_image
        return options


def settings_for(image: str | None = None, packages: list[str] | None = None,
                 pip_index_urls: list[str] | None = None) -> ComponentSettings:
    """Settings from command-line style choices: the image built from the Dockerfile (or ``image``), containerized,
    unless packages are named, which makes the components lightweight ones that install them at start-up."""
    if packages:
        return ComponentSettings(base_image=image or LIGHTWEIGHT_BASE_IMAGE, packages_to_install=tuple(packages),
                                 pip_index_urls=tuple(pip_index_urls or ()), containerized=False)
    return ComponentSettings(base_image=image or DEFAULT_IMAGE, pip_index_urls=tuple(pip_index_urls or ()))


#: For kfp.local's SubprocessRunner(use_venv=False): the current interpreter already has everything; the image name
#: only silences kfp's warning about non-Python images and is never pulled.
LOCAL_SETTINGS = ComponentSettings(base_image=LIGHTWEIGHT_BASE_IMAGE, containerized=False)


def plain_python_image(image: str) -> bool:
    """True for the official Python images (``python:3.11-slim``, ``docker.io/library/python@sha256:...``): KFP's
    lightweight default, which hold Python and pip and nothing of a pipeline."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return name in ("python", "library/python", "docker.io/python", "docker.io/library/python")


def check_lightweight(settings: ComponentSettings, backend: str, where: str) -> None:
    """Refuse lightweight components (``--package``) that could not run the pipeline, as the containerized compile
    refuses a pipeline whose files the image would not hold (`SpecError` naming the option, exit code 2):

    - on `LIGHTWEIGHT_BASE_IMAGE` (no ``--image``) or any official Python image (`plain_python_image`): it holds
      none of the pipeline's files (its prepare script, job spec, training and evaluation code, read under
      ``pipeline_dir``) and nothing the pipeline's scripts import. Another image is checked as the containerized
      compile checks its own (`trainops.components.pipeline.check_image_paths`, which runs for both kinds);
    - without a trainops requirement among the packages, or one lacking an extra the components need: ``kfp``
      (every component) and the backend's (`Backend.EXTRAS`: ``torch`` where the train pod runs the job's hosts,
      ``aws`` for SageMaker).
    """
    import re


    if settings.containerized:
        return
    problems = []
    if plain_python_image(settings.base_image):
        problems.append(Problem("--image", f"{settings.base_image} holds none of the pipeline's files (the "
                                           "prepare script, the job spec, the training and evaluation code the "
                                           "components read under pipeline_dir) and none of what its scripts "
                                           "import: give --image an image that holds the pipeline's directory at "
                                           f"its WORKDIR {IMAGE_WORKDIR} (the one `trainops kfp build` builds from "
                                           "the Dockerfile), or compile without --package (containerized)"))
    needed = {"kfp", *backend_class(backend).EXTRAS}
    extras: set[str] | None = None
    for requirement in settings.packages_to_install:
        match = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", requirement)
        if match and re.sub(r"[-_.]+", "-", match.group(1)).lower() == "trainops":
            extras = (extras or set()) | {part.strip() for part in (match.group(2) or "").split(",") if part.strip()}
    if extras is None:
        problems.append(Problem("--package", "installs no trainops, whose functions the components run: add a "
                                             f"requirement such as 'trainops[{','.join(sorted(needed))}] @ "
                                             "https://.../trainops-<version>-py3-none-any.whl'"))
    elif needed - extras:
        problems.append(Problem("--package", f"the trainops requirement lacks the extras "
                                             f"{', '.join(sorted(needed - extras))} (the components need "
                                             f"{', '.join(sorted(needed))} with the {backend} backend): install "
                                             f"trainops[{','.join(sorted(needed | extras))}]"))
    if problems:
        raise SpecError(problems, where)
