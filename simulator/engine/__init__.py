"""The event engine: request flow, target replicas, draft devices and network on one SimPy clock."""
