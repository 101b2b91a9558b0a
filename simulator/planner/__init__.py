"""The goodput planner: candidate configurations, what-if scoring and the online planner hook."""
