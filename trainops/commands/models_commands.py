"""`trainops models list|show|approve|reject`: the local model registry from the command line.

Function-local imports (CLI start): `trainops --help` imports every command module to build its parser; what a
command runs (the spec, the steps, the backends) loads when it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trainops.commands.backend_args import add_backend_arguments, backend_options, open_backend
from trainops.commands.parsing import add_command, add_group
from trainops.errors import Problem, SpecError

#: At most this many metrics appear in a row of `trainops models list` (all of them are in `show` and `--json`).
LISTED_METRICS = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the models commands to the command line."""
    actions = add_group(
        subparsers, "models", dest="models_command", metavar="ACTION",
        help="list, show and approve registered models (local registry)",
        description="The local model registry: model groups, their versions, metrics, approval status and champion "
                    "(the latest Approved version). Default registry: $TRAINOPS_HOME/registry (~/.trainops/registry).")

    def add_registry_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--registry", metavar="DIR", default=None,
                            help="shorthand for -o registry_dir=DIR: the registry directory (default: "
                                 "$TRAINOPS_HOME/registry)")
        add_backend_arguments(parser)

    listing = add_command(actions, "list", list_command, help="a table of registered versions",
                          description="One row per version: group, version, status, key metrics, creation "
                                      "time; '*' marks each group's champion.")
    add_registry_option(listing)
    listing.add_argument("--group", metavar="NAME", default=None, help="only this model group")
    listing.add_argument("--json", action="store_true", help="JSON on stdout instead of a table")

    show = add_command(actions, "show", show_command, help="one version in full (default: the latest)",
                       description="Everything recorded about one version: artifact, metrics, approval "
                                   "history, job name and the spec that produced it.")
    add_registry_option(show)
    show.add_argument("group", help="model group")
    show.add_argument("version", nargs="?", type=int, default=None, help="version number (default: the latest)")
    show.add_argument("--json", action="store_true", help="JSON on stdout")

    for name, status, text in (("approve", "Approved", "mark a version Approved (it may become the champion)"),
                               ("reject", "Rejected", "mark a version Rejected (it stops being the champion)")):
        action = add_command(actions, name, approval_command, help=text, description=text[0].upper() + text[1:] + ".")
        add_registry_option(action)
        action.add_argument("group", help="model group")
        action.add_argument("version", type=int, help="version number")
        action.set_defaults(status=status)


def _registry(args: argparse.Namespace):
    from trainops.backends.job_kinds import needed

    backend = open_backend(args, backend_options(args, registry_dir=args.registry))
    registry = needed(needed(backend.registry(), backend, "registry").browse(), backend, "browse")
    if registry.root.exists() and not registry.root.is_dir():
        raise SpecError(Problem("--registry", f"{registry.root} is a file, not a registry: give the registry's "
                                              "directory (default $TRAINOPS_HOME/registry)"))
    return registry


def _metrics_text(metrics: dict[str, float], limit: int | None = LISTED_METRICS) -> str:
    from trainops.steps.gate import format_number

    names = sorted(metrics)
    shown = names if limit is None else names[:limit]
    text = " ".join(f"{name}={format_number(metrics[name])}" for name in shown)
    if len(names) > len(shown):
        text += f" (+{len(names) - len(shown)})"
    return text or "-"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)


def list_command(args: argparse.Namespace) -> int:
    registry = _registry(args)
    versions = registry.list(args.group)
    # A damaged version is named on stderr (stdout stays a clean table or JSON); the others are listed as usual.
    for group, version, why in registry.damaged(args.group):
        print(f"warning: {group} version {version} is damaged and left out: {why}", file=sys.stderr)
    if args.group is not None and not versions and not registry.damaged(args.group):
        registry.get(args.group)  # raises the "no such group" error, which lists the groups there are
    champions = {group: registry.champion(group) for group in {entry.group for entry in versions}}
    is_champion = {(group, entry.version) for group, entry in champions.items() if entry is not None}
    if args.json:
        records = [dict(entry.to_dict(include_spec=False), champion=(entry.group, entry.version) in is_champion)
                   for entry in versions]
        json.dump(records, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not versions:
        print(f"no models registered in {registry.root}")
        return 0
    rows = [["GROUP", "VERSION", "STATUS", "METRICS", "CREATED", "CHAMPION"]]
    for entry in versions:
        rows.append([entry.group, str(entry.version), entry.approval_status, _metrics_text(entry.metrics),
                     entry.created, "*" if (entry.group, entry.version) in is_champion else ""])
    print(_table(rows))
    return 0


def _show_text(entry: Any, champion: bool) -> str:
    fields = [
        ("group", entry.group),
        ("version", f"{entry.version}{'  (champion)' if champion else ''}"),
        ("status", entry.approval_status),
        ("created", entry.created),
        ("model artifact", entry.model_artifact),
        ("registered from", entry.source_artifact),
        ("job name", entry.job_name or "-"),
    ]
    if entry.description:
        fields.append(("description", entry.description))
    width = max(len(label) for label, _ in fields) + 2
    lines = [f"{label + ':':<{width}}{value}" for label, value in fields]
    lines.append("metrics:")
    lines += [f"  {name}: {value}" for name, value in sorted(entry.metrics.items())] or ["  (none)"]
    lines.append("approval history:")
    lines += [f"  {change.get('time', '?')}  {change.get('status', '?')}" for change in entry.approval_history]
    lines.append("spec:")
    lines.append("  " + json.dumps(entry.spec, indent=2, sort_keys=True).replace("\n", "\n  ")
                 if entry.spec is not None else "  (not recorded)")
    return "\n".join(lines)


def show_command(args: argparse.Namespace) -> int:
    registry = _registry(args)
    entry = registry.get(args.group, args.version)
    champion = registry.champion(args.group)
    is_champion = champion is not None and champion.version == entry.version
    if args.json:
        json.dump(dict(entry.to_dict(), champion=is_champion), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(_show_text(entry, is_champion))
    return 0


def approval_command(args: argparse.Namespace) -> int:
    registry = _registry(args)
    entry = registry.set_approval(args.group, args.version, args.status)
    champion = registry.champion(args.group)
    holder = f"version {champion.version}" if champion is not None else "none (no Approved version)"
    print(f"{entry.group} version {entry.version}: {entry.approval_status}; champion: {holder}")
    return 0
