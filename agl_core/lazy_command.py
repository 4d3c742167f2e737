"""Subcommands imported only when they run, so ``agl --help`` lists them without importing the store layer."""

from __future__ import annotations

import re

import click

from agl_core.registry import import_target

__all__ = ["LazyCommand", "plain_help"]


def plain_help(text: str) -> str:
    """``text`` with reStructuredText markup as a terminal should show it (``x`` -> 'x', roles dropped)."""
    text = re.sub(r"``([^`]+)``", r"'\1'", text)
    return re.sub(r":[a-z:]+:`~?([^`]+)`", r"\1", text)


def _plain_help_tree(command: click.Command) -> None:
    for attr in ("help", "short_help", "epilog"):
        value = getattr(command, attr, None)
        if isinstance(value, str):
            setattr(command, attr, plain_help(value))
    for param in command.params:
        if isinstance(param, click.Option) and isinstance(param.help, str):
            param.help = plain_help(param.help)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _plain_help_tree(sub)


class LazyCommand(click.Command):
    """Stands for the command at ``target`` (``"module:attr"``) in a group's listing until it is used.

    The ``agl`` group (:class:`agl_core.cli.AglGroup`) swaps it for the real command on first lookup;
    ``short_help`` is what the listing shows (a test keeps it equal to the real command's).
    """

    def __init__(self, name: str, target: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help, help=short_help)
        self.target = target

    def load(self) -> click.Command:
        """Import the real command (its help texts without reStructuredText markup)."""
        command = import_target(self.target)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is a {type(command).__name__}, not a click command")
        _plain_help_tree(command)
        return command
