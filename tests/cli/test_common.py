"""What every command shares (infoflow_dsl/cli/common.py): each command declared as a
:class:`Command`, every flag with a help text, and the flags several commands take added by
common's helpers alone, alike wherever they appear."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from infoflow_dsl.cli.common import DTYPES, Command, nonnegative_int
from infoflow_dsl.cli.main import COMMANDS, build_parser

CLI = Path(__file__).resolve().parents[2] / "infoflow_dsl" / "cli"
SHARED = ("--T", "--eps", "--dtype", "--seed", "--samples", "--json", "-o", "--device", "--workers")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name."""
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def flag(command: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    """``command``'s action for the flag ``name``, if it takes it."""
    return next((a for a in command._actions if name in a.option_strings), None)


def test_every_flag_of_every_command_has_help_text() -> None:
    silent = [f"{name} {'/'.join(action.option_strings) or action.dest}"
              for name, command in subcommands().items() for action in command._actions
              if not action.help and action.option_strings and not isinstance(action, argparse._HelpAction)]
    assert silent == []


def test_every_command_is_a_frozen_declaration() -> None:
    assert all(isinstance(command, Command) for command in COMMANDS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        COMMANDS[0].name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_a_shared_flag_is_added_by_its_helper_only(path: Path) -> None:
    """No command module adds ``--seed`` (or another shared flag) itself: common.py's ``add_*`` does."""
    added = re.findall(r"add_argument\(\s*\"(-[-\w]+)\"", path.read_text(encoding="utf-8"))
    assert path.name == "common.py" or not set(added) & set(SHARED), added


def test_a_shared_flag_is_the_same_flag_in_every_command() -> None:
    commands = subcommands()
    seeds = [flag(c, "--seed") for c in commands.values() if flag(c, "--seed")]
    assert len(seeds) >= 5 and all(s.type is nonnegative_int and s.default == 0 for s in seeds if s)
    dtypes = [flag(c, "--dtype") for c in commands.values() if flag(c, "--dtype")]
    assert len(dtypes) == 2 and all(d.choices == DTYPES and d.default is None for d in dtypes if d)
    outputs = [flag(c, "-o") for c in commands.values() if flag(c, "-o")]
    assert len(outputs) >= 8 and all(o.option_strings == ["-o", "--output"] and o.type is Path for o in outputs if o)
    lengths = [flag(commands[name], "--T") for name in ("parse", "analyze", "compile", "train", "sweep")]
    assert all(t is not None and t.dest == "length" and t.help == "override the program's length T" for t in lengths)
    devices = {name: flag(c, "--device") for name, c in commands.items() if flag(c, "--device")}
    assert devices["train"].default == "cpu" and devices["compile"].default is None  # type: ignore[union-attr]
    assert all(d.help.startswith("cpu or cuda") for d in devices.values() if d and d.help)
