"""Build step that ships the data folders inside the package (metadata: pyproject.toml).

The LUTs, device profiles, acceptance curves and scenarios live in top-level
folders of the repository; a built wheel carries a copy of them in
``simulator/data/`` (``.py`` tools excluded), where
``simulator.builtin_data`` finds them. An editable install reads the
top-level folders directly and copies nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_DIRS = ("lut", "device_profiles", "acceptance", "scenarios")
"""Kept equal to ``simulator.builtin_data.DATA_DIRS`` (a test checks it)."""
TARGET = Path("simulator") / "data"


def data_files() -> list[Path]:
    """Every shipped data file, relative to the repository root."""
    found = []
    for folder in DATA_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            relative = path.relative_to(ROOT)
            if (
                path.is_file()
                and path.suffix != ".py"
                and not any(part.startswith((".", "__")) for part in relative.parts)
            ):
                found.append(relative)
    return found


class BuildWithData(build_py):
    """``build_py`` that also copies the data folders into ``simulator/data/``."""

    def run(self) -> None:
        """Build the modules, then copy the data (not for an editable install)."""
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for relative in data_files():
            target = Path(self.build_lib) / TARGET / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / relative, target)


if __name__ == "__main__":  # the build backend runs this file as __main__
    setup(cmdclass={"build_py": BuildWithData})
