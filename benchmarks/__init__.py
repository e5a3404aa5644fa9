"""The benchmark suite: ``python -m benchmarks list``, ``python -m benchmarks run NAME``.

Groups: :mod:`benchmarks.quality` (what the retrieval hands over, scored on the shared dev
set), :mod:`benchmarks.latency` (how long a call waits) and :mod:`benchmarks.throughput`
(how much goes through, and what still works under load). Code used by more than one
benchmark is in :mod:`benchmarks.common`; the table of benchmarks is
:mod:`benchmarks.registry`. Not part of the installed package.
"""
