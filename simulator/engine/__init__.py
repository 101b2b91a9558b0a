"""The event engine: SimPy processes for replicas, devices, network and requests."""
