"""The subcommands of ``simulate``, one module each (see :mod:`simulator.cli`).

A subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``execute(args) -> int``, and imports heavy libraries inside ``execute`` only.
"""
