"""The parts of the scale benchmark (:mod:`benchmarks.latency.scale`); not benchmarks."""
