"""`trainctl export`: a run's tables in the formats other tools open (Perfetto / Chrome trace JSON)."""
