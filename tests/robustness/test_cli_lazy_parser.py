"""``linkstream COMMAND`` builds only COMMAND's group of subparsers (a start-up cost):
the groups must name every subcommand, and each command's parser must be the same one
the whole ``linkstream --help`` parser has."""

from __future__ import annotations

import contextlib
import io

import pytest

from linkstream.cli.main import _GROUPS, _command_of, build_parser


def _subcommands(ap) -> dict:
    return next(a.choices for a in ap._actions if isinstance(getattr(a, "choices", None), dict))


def test_groups_name_every_subcommand() -> None:
    assert set(_subcommands(build_parser())) == {n for names in _GROUPS.values() for n in names}


@pytest.mark.parametrize("command", sorted({n for names in _GROUPS.values() for n in names}))
def test_a_command_alone_parses_as_in_the_whole_parser(command: str) -> None:
    assert _command_of([command, "--x"]) == command
    whole = _subcommands(build_parser())[command]
    alone_ap = build_parser(command)
    alone = _subcommands(alone_ap)[command]
    group = next(names for names in _GROUPS.values() if command in names)
    assert set(_subcommands(alone_ap)) == set(group)
    assert alone.format_help() == whole.format_help()


def test_top_level_help_and_unknown_commands_use_the_whole_parser() -> None:
    assert _command_of([]) is None and _command_of(["--help"]) is None and _command_of(["nope"]) is None
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser(_command_of(["--help"])).parse_args(["--help"])
    assert all(name in out.getvalue() for names in _GROUPS.values() for name in names)
