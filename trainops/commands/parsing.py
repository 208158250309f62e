"""How a command module adds its commands to the `trainops` parser: each command bound to its handler as it is made.

`trainops.cli` runs ``args.handler(args)``; a command made with `add_command` has one by construction, and a group
made with `add_group` (``trainops kfp ...``, ``trainops models ...``) refuses to run without one of its commands.
Only argparse here: every command module imports it when the parser is built, and ``trainops --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Handler = Callable[[argparse.Namespace], Any]


def add_command(subparsers: argparse._SubParsersAction, name: str, handler: Handler, **parser_arguments: Any
                ) -> argparse.ArgumentParser:
    """The command ``name`` (``help``, ``description``, ``epilog``... as for ``add_parser``), run by ``handler``."""
    command: argparse.ArgumentParser = subparsers.add_parser(name, **parser_arguments)
    command.set_defaults(handler=handler)
    return command


def add_group(subparsers: argparse._SubParsersAction, name: str, *, dest: str, metavar: str = "COMMAND",
              **parser_arguments: Any) -> argparse._SubParsersAction:
    """The command group ``name``: the sub-parsers of its commands, one of which must be given (named in ``dest``)."""
    group = subparsers.add_parser(name, **parser_arguments).add_subparsers(dest=dest, metavar=metavar)
    group.required = True
    return group
