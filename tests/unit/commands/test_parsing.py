"""Every `trainops` command is bound to its handler, and a group refuses to run without one of its commands."""

from __future__ import annotations

import argparse

import pytest

from trainops.cli import build_parser
from trainops.commands.parsing import add_command, add_group


def _leaves(parser: argparse.ArgumentParser, path: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        return [(path.strip(), parser)]
    return [leaf for group in groups for name, sub in group.choices.items() for leaf in _leaves(sub, f"{path} {name}")]


def test_every_command_of_the_cli_has_a_handler():
    leaves = dict(_leaves(build_parser()))
    assert {"run", "status", "logs", "stop", "kfp compile", "models approve", "backends"} <= set(leaves)
    unbound = sorted(path for path, parser in leaves.items() if not callable(parser.get_default("handler")))
    assert unbound == []
    assert leaves["models reject"].get_default("status") == "Rejected"  # a command's own defaults stay beside it


def test_add_command_binds_the_handler_and_add_group_requires_a_command(capsys):
    def handler(args: argparse.Namespace) -> int:
        return 7

    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command")
    group = add_group(commands, "things", dest="things_command", help="a group")
    show = add_command(group, "show", handler, help="show one", description="Show one thing.")
    show.add_argument("name")
    args = parser.parse_args(["things", "show", "x"])
    assert args.handler(args) == 7 and args.name == "x" and args.things_command == "show"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["things"])
    assert exit_info.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err
