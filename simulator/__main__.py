"""``python -m simulator``: the ``simulate`` command."""

import sys

from simulator.cli import main

sys.exit(main())
