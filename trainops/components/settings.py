"""Where the KFP components run: their image and what pip installs in it before the step starts.

Two setups work on a cluster with network:

- an image built from the repository's ``Dockerfile`` (trainops with its ``aws`` and ``kfp`` extras, and the
  examples): ``ComponentSettings(base_image="registry.example.com/trainops:0.1.0")``, nothing to install;
- a plain Python image that installs trainops at start-up (the default): ``python:3.11-slim`` with
  ``trainops[aws,kfp]==<this version>`` from the package index (``pip_index_urls`` for a private one).

`LOCAL_SETTINGS` is for ``kfp.local`` with ``SubprocessRunner(use_venv=False)``: it installs nothing, so a local run
works offline with the packages of the current interpreter. kfp's own package is never injected
(``install_kfp_package=False``): every setup above already carries kfp, and kfp would otherwise add a
``pip install kfp==...`` line to every component, which fails offline.

This module imports no kfp: the command line reads it to build its options.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops import __version__

#: The default image: a Python that matches what trainops supports, with pip.
DEFAULT_BASE_IMAGE = "python:3.11-slim"
#: The package the default image installs; pinned to the version that compiled the pipeline, so the component code
#: embedded in the YAML and the trainops it calls agree.
DEFAULT_PACKAGE = f"trainops[aws,kfp]=={__version__}"


@dataclass(frozen=True)
class ComponentSettings:
    """How every trainops component is built.

    Attributes:
        base_image: the container image each component runs in.
        packages_to_install: pip requirements installed before the component function runs (empty: none).
        pip_index_urls: package indexes for those requirements (empty: pip's default).
    """

    base_image: str = DEFAULT_BASE_IMAGE
    packages_to_install: tuple[str, ...] = (DEFAULT_PACKAGE,)
    pip_index_urls: tuple[str, ...] = field(default_factory=tuple)

    def component_options(self) -> dict:
        """The keyword arguments of ``kfp.dsl.component`` these settings stand for."""
        return {
            "base_image": self.base_image,
            "packages_to_install": list(self.packages_to_install),
            "pip_index_urls": list(self.pip_index_urls) or None,
            "install_kfp_package": False,
        }


def settings_for(image: str | None = None, packages: list[str] | None = None,
                 pip_index_urls: list[str] | None = None) -> ComponentSettings:
    """Settings from command-line style choices: an image of our own (built from the Dockerfile) needs no packages
    unless some are named; without an image the default Python image installs trainops."""
    if image:
        return ComponentSettings(base_image=image, packages_to_install=tuple(packages or ()),
                                 pip_index_urls=tuple(pip_index_urls or ()))
    return ComponentSettings(packages_to_install=tuple(packages) if packages else (DEFAULT_PACKAGE,),
                             pip_index_urls=tuple(pip_index_urls or ()))


#: For kfp.local's SubprocessRunner(use_venv=False): the current interpreter already has everything; the image name
#: only silences kfp's warning about non-Python images and is never pulled.
LOCAL_SETTINGS = ComponentSettings(base_image=DEFAULT_BASE_IMAGE, packages_to_install=())
