"""Parts of the filter benchmark (``benchmarks/latency/filters.py``)."""
