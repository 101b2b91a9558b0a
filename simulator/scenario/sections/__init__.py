"""The sections of a scenario document, each checked and built by its own module.

See :mod:`simulator.scenario` for the module map. Nothing is imported here:
:mod:`simulator.scenario.build` imports each section module by name.
"""
