"""Metrics: aggregation of flat run records into summaries."""
