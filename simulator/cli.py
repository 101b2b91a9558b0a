"""``simulate``: the command line of specdec-sim.

Usage::

    simulate [--version] [-h]
    simulate run SCENARIO [-o DIR] [--seed N] [--set dotted.key=value ...] [--label NAME]
                 [--quiet] [--report]
                 [--trace-events FILE [--trace-requests N] [--trace-max-events N]]
    simulate SCENARIO ...                 (the same as ``simulate run SCENARIO ...``)
    simulate validate PATH [PATH ...] [--kind KIND]
    simulate plot RUN [RUN ...] [-o OUT] [--label NAME ...]
    simulate policies [--json]
    simulate sweep SWEEP [-o DIR] [--executor local|ray] [--workers N] [--ray-address ADDR]
    simulate capacity SCENARIO --slo-attainment F [--low L] [--high H] [--tolerance T]
    simulate plan SPACE [-o DIR] [--slo-attainment F] [--low L] [--high H] [--tolerance T]
                  [--executor local|ray] [--workers N] [--ray-address ADDR] [--top N] [-q]

Every subcommand takes ``-v/--verbose`` (repeat for more) and
``--log-level LEVEL``. A first argument that names a subcommand is always that
subcommand; any other first argument is a scenario to run, so a scenario file
named like a subcommand runs as ``simulate ./validate``. A first argument that
is no file, looks like no path (no ``/``, ``:`` or suffix) and is close to a
subcommand's name is a mistyped subcommand: ``simulate valdate x.yaml`` exits
with status 2 and ``unknown command 'valdate'; did you mean 'validate'?``.

``run``, ``validate``, ``sweep``, ``capacity`` and ``plan`` take
``--allow-plugins MODULE[,MODULE]``: the consent a scenario needs to import a
policy class by import path (see SCENARIO.md, "Plug-ins and trust").

Each subcommand lives in its own module of :mod:`simulator.commands`, which
imports the heavy libraries only when it runs, so ``--help`` and
``--version`` answer at once. Adding a subcommand is one entry in
:data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module
from pathlib import Path
from typing import Protocol

from simulator._version import __version__

COMMANDS: dict[str, str] = {
    "run": "simulator.commands.run",
    "validate": "simulator.commands.validate",
    "plot": "simulator.commands.plot",
    "policies": "simulator.commands.policies",
    "sweep": "simulator.commands.sweep",
    "capacity": "simulator.commands.capacity",
    "plan": "simulator.commands.plan",
}
"""Subcommand name → module with ``HELP``, ``add_arguments(parser)`` and ``execute(args)``."""

DEFAULT_COMMAND = "run"
"""The subcommand of a first argument that names none (a scenario file)."""

TOP_LEVEL_OPTIONS = frozenset({"-h", "--help", "--version"})


class Command(Protocol):
    """What a subcommand module provides."""

    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the subcommand's arguments to its parser."""

    def execute(self, args: argparse.Namespace) -> int:
        """Run the subcommand; return the exit status."""


def _command(name: str) -> Command:
    module: Command = import_module(COMMANDS[name])
    return module


def parser() -> argparse.ArgumentParser:
    """Return the ``simulate`` parser with every subcommand."""
    from simulator.log_setup import add_logging_arguments

    top = argparse.ArgumentParser(
        prog="simulate",
        description="Simulate LLM serving with speculative decoding. "
        "'simulate SCENARIO' is short for 'simulate run SCENARIO'.",
    )
    top.add_argument("--version", action="version", version=f"specdec-sim {__version__}")
    subparsers = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        command = _command(name)
        sub = subparsers.add_parser(name, help=command.HELP, description=command.HELP)
        command.add_arguments(sub)
        add_logging_arguments(sub)
    return top


def command_words(words: list[str]) -> list[str]:
    """Return ``words`` with the default subcommand put first when they name none."""
    if not words or words[0] in COMMANDS or words[0] in TOP_LEVEL_OPTIONS:
        return words
    return [DEFAULT_COMMAND, *words]


def forget_working_folder() -> None:
    """Take the working folder off ``sys.path`` where ``python -m`` put it.

    ``python -m simulator`` searches the working folder for modules first, the
    ``simulate`` console script does not: without this, a ``helper.py`` lying
    there would be imported by a scenario's ``helper:Class`` under one and not
    the other. A folder the user put on ``PYTHONPATH`` stays. The packages of
    this project are imported first, so a source checkout run from its root
    still finds them.
    """
    import policies  # noqa: F401  (found before the folder goes; submodules follow it)

    if getattr(sys.flags, "safe_path", False) or not sys.path:  # python -P: nothing added
        return
    if sys.path[0] in ("", str(Path.cwd())):
        del sys.path[0]


def mistyped_command(word: str) -> str | None:
    """Return why a first argument is refused as a mistyped subcommand, or None.

    A word that is no file, looks like no path (no ``/``, ``:`` or suffix) and
    is close to a subcommand's name is one; any other word is left to ``run``
    as a scenario (which reports a missing file itself).
    """
    from simulator.suggest import close_matches, did_you_mean

    if word in COMMANDS or word.startswith("-") or "/" in word or ":" in word or "." in word:
        return None
    if not close_matches(word, COMMANDS) or Path(word).exists():
        return None
    return f"unknown command {word!r}{did_you_mean(word, COMMANDS)}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``simulate`` command."""
    from simulator.log_setup import configure_logging

    words = list(argv) if argv is not None else sys.argv[1:]
    problem = mistyped_command(words[0]) if words else None
    if problem is not None:
        from simulator.errors import EXIT_INPUT_ERROR, InputError, make_issue

        allowed = f"a subcommand ({', '.join(COMMANDS)}) or a scenario file"
        error = InputError([make_issue("command line", "COMMAND", words[0], allowed, problem)])
        print(error.render(), file=sys.stderr)
        return EXIT_INPUT_ERROR
    args = parser().parse_args(command_words(words))
    configure_logging(args.verbose, args.log_level)
    args.argv = words
    return _command(args.command).execute(args)


if __name__ == "__main__":
    forget_working_folder()
    sys.exit(main())
