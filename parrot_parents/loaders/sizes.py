"""The hierarchy's default sizes, in characters (a light module: the CLI reads it).

The seed spec names the parent sizes ``*_tokens`` for compatibility; they are counted in
characters (see :mod:`parrot_parents.loaders.hierarchy`).
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_CHILD_SIZE",
    "DEFAULT_PARENT_OVERLAP",
    "DEFAULT_PARENT_SIZE",
    "DEFAULT_THRESHOLD",
]

#: Maximum child length in characters (chosen on the shared dev set: docs/benchmarks.md).
DEFAULT_CHILD_SIZE = 400
#: A document longer than this is cut into parent_chunks (3 levels).
DEFAULT_THRESHOLD = 16000
#: parent_chunk length.
DEFAULT_PARENT_SIZE = 4000
#: Characters shared by neighbouring parent_chunks.
DEFAULT_PARENT_OVERLAP = 200
