"""Golden figures of the example scenarios (``examples.json``) and how to refresh them.

``python -m tests.golden`` reruns every example at its test size and rewrites
``examples.json``; review the diff before committing it.
"""
