"""`trainops backends`: the backends a command may name, and the settings each takes (`-o KEY=VALUE`).

Function-local imports (CLI start): `trainops --help` imports this module to build its parser; the backends'
classes and settings load only when `trainops backends` runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trainops.commands.parsing import add_command
from trainops.errors import SpecError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the backends command to the command line."""
    command = add_command(
        subparsers, "backends", backends_command,
        help="list the backends (built in, installed, named) and the settings each takes",
        description="List every backend a command, a pipeline file, a DAG or a KFP pipeline may name: the built-in "
                    "ones, those installed packages register (entry-point group trainops.backends), and the named "
                    "ones of the platform's file ($TRAINOPS_BACKENDS, else backends.yaml in the user's "
                    "configuration directory), with the settings each takes as -o KEY=VALUE.")
    command.add_argument("--json", action="store_true", help="print the list as JSON")


def backends_command(args: argparse.Namespace) -> int:
    from trainops.backends import BUILTIN, backend_class, default_backend, named, registered
    from trainops.backends.named_file import config_path
    from trainops.backends.setting_help import describe

    rows: list[dict[str, Any]] = []
    for name, path in registered().items():
        entry = {"name": name, "backend": name, "source": "built in" if name in BUILTIN else f"package ({path})",
                 "default": name == default_backend()}
        try:
            cls = backend_class(name)
            # What text can give (-o), each with its help and default, as torchx's runopts list them; a setting
            # that takes a Python object (a client factory, a callback) is for code, not listed.
            # "settings" stays name -> type (the JSON's first form); "setting_help" adds each one's help and default.
            described = describe(cls)
            entry["settings"] = {row.name: row.kind for row in described}
            entry["setting_help"] = {row.name: {"help": row.help, "default": row.default} for row in described}
            entry["capabilities"] = job_kinds(cls)
        except SpecError as error:  # a package whose backend cannot be imported: listed, with why
            entry["error"] = str(error.problems[0].message if error.problems else error)
        rows.append(entry)
    for name, item in named().items():
        rows.append({"name": name, "backend": item.backend, "source": f"named ({config_path()})",
                     "options": dict(item.options)})
    if args.json:
        json.dump(rows, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return 0
    for row in rows:
        mark = " (default)" if row.get("default") else ""
        print(f"{row['name']}{mark}: {row['source']}" + (f" -> {row['backend']}" if row["name"] != row["backend"]
                                                         else ""))
        if "settings" in row:
            print("  settings (-o KEY=VALUE):" if row["settings"] else "  settings: none")
            for key, kind in row["settings"].items():
                about = row["setting_help"][key]
                print(f"    {key} ({kind}, default: {about['default']}): {about['help']}")
        if "options" in row:
            print("  options: " + ", ".join(f"{key}={value}" for key, value in row["options"].items()))
        if "error" in row:
            print(f"  error: {row['error']}")
    return 0


def job_kinds(cls: Any) -> list[str]:
    """What a backend does beside training (its job-kind objects, `trainops.backends.job_kinds.kinds_of`), and
    whether it runs jobs in the caller's process; a backend that cannot be opened without settings lists none."""
    from trainops.backends.job_kinds import kinds_of

    try:
        found = kinds_of(cls())
    except Exception:  # noqa: BLE001 - a backend that needs its settings to be opened: nothing to list
        found = []
    return found + (["runs jobs here"] if cls.RUNS_HERE else [])
