"""``simulate policies``: list every policy family, policy and parameter.

Built-in policies and plug-ins (with their entry point and distribution) are
listed with each parameter's type, default and description.
"""

from __future__ import annotations

import argparse
import json

HELP = "list every policy family, policy and parameter (built-ins and plug-ins)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``simulate policies``."""
    parser.add_argument("--json", action="store_true", help="print the listing as JSON")


def execute(args: argparse.Namespace) -> int:
    """Run ``simulate policies``."""
    from simulator.cli_support import run_guarded

    def entry() -> int:
        from simulator.policy_list import policy_listing, render_listing

        listing = policy_listing()
        print(json.dumps(listing, indent=2) if args.json else render_listing(listing))
        return 0

    return run_guarded(entry)
