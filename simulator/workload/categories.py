"""Task categories: what a request asks for (math, translation, ...), as far as drafting cares.

A request may carry a category (a trace's ``category`` column, or a draw from
``synthetic.category_mix``). Acceptance curves with per-category bins answer
for it (see ``acceptance/README.md``) and reports break results down by it.
"""

from __future__ import annotations

import re

CATEGORY_NAME = re.compile(r"[a-z][a-z0-9_]*")
"""A category name: lower-case letters, digits and underscores, starting with a letter."""

NO_CATEGORY = ""
"""The category of a request that names none."""
