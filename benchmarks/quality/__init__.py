"""Quality benchmarks: what the retrieval hands over, scored on the shared dev set."""
