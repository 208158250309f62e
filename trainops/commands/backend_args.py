"""How a command chooses its backend: ``--backend NAME`` and ``-o/--option KEY=VALUE`` (repeatable), the same on
every command that reaches a backend (run, status, logs, stop, render, stage, models).

The options are the backend's one mapping of settings (`trainops.backends.get_backend`'s ``options``): how it is
reached (``-o region=eu-west-1``, ``-o workdir=DIR``) and its jobs' options (``-o processes_per_host=2``,
``-o preflight=false``); the backend's own types coerce the text and refuse what it does not take, naming it. A
command's older flags (``--workdir``, ``--region``, ``--processes-per-host``, ``--channel``, ``--image-python``,
``--launcher``) are shorthands that feed the same mapping. Nothing here names a backend: the default is the
registry's, and what a backend needs to be reached (a region from the AWS configuration) it declares
(`Backend.NEEDS`).

Function-local imports (CLI start): `trainops --help` imports every command module to build its parser; what a
command runs (the spec, the steps, the backends) loads when it runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from trainops.errors import Problem, SpecError

BACKEND_HELP = ("the backend: a registered one or a named one (`trainops backends` lists them; default: the "
                "registry's default, local)")
OPTION_HELP = ("a setting of the backend, repeatable: how it is reached and its jobs' options (e.g. -o "
               "processes_per_host=2, -o preflight=false, -o channel_overrides=train=/data); text is coerced to "
               "the setting's type, and a setting the backend does not take is refused")

#: The shorthand flags of settings that say where a job lives, as a command that finds a job offers them.
SHORTHAND_HELP = {
    "workdir": "shorthand for -o workdir=DIR: the state directory",
    "region": "shorthand for -o region=...: the AWS region",
}


def add_backend_arguments(parser: argparse.ArgumentParser, *, backend_help: str = BACKEND_HELP,
                          shorthands: tuple[str, ...] = ()) -> None:
    """``--backend NAME`` and ``-o/--option KEY=VALUE`` on a command, and the ``shorthands`` it offers
    (``--workdir``, ``--region``: names of `SHORTHAND_HELP`), each feeding the setting of its name."""
    parser.add_argument("--backend", default=None, metavar="NAME", help=backend_help)
    parser.add_argument("-o", "--option", dest="backend_option", action="append", default=[], metavar="KEY=VALUE",
                        help=OPTION_HELP)
    for name in shorthands:
        parser.add_argument(f"--{name}", default=None, help=SHORTHAND_HELP[name])


def option_items(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` texts as a mapping (a key given twice: the list of its values, which a mapping or list setting
    merges and any other refuses); `SpecError` naming ``-o`` for an item without ``=``."""
    found: dict[str, Any] = {}
    problems = []
    for item in items:
        key, separator, value = item.partition("=")
        key = key.strip()
        if not separator or not key:
            problems.append(Problem("-o", f"{item!r}: expected KEY=VALUE (e.g. -o processes_per_host=2)"))
            continue
        if key in found:
            previous = found[key]
            found[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            found[key] = value
    if problems:
        raise SpecError(problems)
    return found


def backend_options(args: argparse.Namespace, **shorthands: Any) -> dict[str, Any]:
    """The one mapping of the command's ``-o`` items, with its shorthand flags (``shorthands``: setting -> the
    flag's value, None when not given) laid in; a setting given both ways is refused, naming it."""
    options = option_items(getattr(args, "backend_option", None) or [])
    both = sorted(key for key, value in shorthands.items() if value is not None and key in options)
    if both:
        raise SpecError([Problem(key, "is given twice (a flag and -o): give it once") for key in both])
    options.update({key: value for key, value in shorthands.items() if value is not None})
    return options


def open_backend(args: argparse.Namespace, options: dict[str, Any], **context: Any) -> Any:
    """The command's backend (``args.backend``, else the default), bound to ``options``, with what it needs to be
    reached found where the backend says (`needed`)."""
    from trainops.backends import backend_class, get_backend, resolve

    _, named_settings = resolve(args.backend, "--backend")
    cls = backend_class(args.backend, "--backend")
    found = needed(cls, {**named_settings, **options}, context)
    return get_backend(args.backend, options={**found, **options}, source="backend options", **context)


def needed(cls: Any, settings: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """The context a backend declares it needs (`Backend.NEEDS`) that neither the user nor the command gave, found
    where it says: ``aws`` is the AWS configuration boto3 reads (``AWS_REGION``, the profile's region). One that
    cannot be found is a `SpecError` saying how to give it."""
    found: dict[str, Any] = {}
    for key, source in cls.NEEDS.items():
        if settings.get(key) is not None or context.get(key) is not None:
            continue
        value = _from_source(key, source)
        if value is None:
            where = {"aws": "the AWS configuration (AWS_REGION, or the AWS profile's region)"}.get(source, source)
            raise SpecError(Problem(key, f"the {cls.name} backend needs a {key}: give -o {key}=..., or set it in "
                                         f"{where}"))
        found[key] = value
    return found


def _from_source(key: str, source: str) -> Any:
    if source == "aws" and key == "region":
        import boto3

        return boto3.session.Session().region_name
    return None
