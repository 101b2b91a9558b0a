"""``python -m simulator``: the ``simulate`` command (the working folder is not searched)."""

import sys

from simulator.cli import forget_working_folder, main

forget_working_folder()
sys.exit(main())
