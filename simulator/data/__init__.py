"""The data files shipped with specdec-sim (LUTs, device profiles, acceptance curves, scenarios).

An installed package holds them below this folder (``lut/``,
``device_profiles/``, ``acceptance/``, ``scenarios/``), copied there from the
top-level folders of the repository when the wheel is built; a checkout
reads the top-level folders themselves. :mod:`simulator.builtin_data` finds
them either way.
"""
