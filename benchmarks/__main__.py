"""``python -m benchmarks list`` and ``python -m benchmarks run NAME [ARGS...]``.

``list`` prints every benchmark with its group and purpose; ``run NAME ARGS`` runs one,
handing ``ARGS`` to its own argument parser (``run NAME --help`` prints its options).
Run from the repository root.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence

from benchmarks.registry import BENCHMARKS, GROUPS, find

USAGE = """usage: python -m benchmarks list
       python -m benchmarks run NAME [ARGS...]

  list             every benchmark: name, group, purpose
  run NAME ARGS    run one benchmark; ARGS go to its own parser (try: run NAME --help)
"""


def list_benchmarks() -> str:
    """The table ``list`` prints: a header, then one line per benchmark, grouped."""
    width = max(len(b.name) for b in BENCHMARKS)
    lines = [f"{'name':<{width}}  {'group':<10}  purpose"]
    for group in GROUPS:
        for bench in (b for b in BENCHMARKS if b.group == group):
            lines.append(f"{bench.name:<{width}}  {bench.group:<10}  {bench.purpose}")
    return "\n".join(lines)


def run(name: str, argv: Sequence[str]) -> int:
    """Run benchmark ``name`` with ``argv``; its exit status (2 for an unknown name)."""
    try:
        bench = find(name)
    except KeyError:
        names = [b.name for b in BENCHMARKS]
        close = difflib.get_close_matches(name, names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        print(
            f"no benchmark {name!r}{hint}; `python -m benchmarks list` names them all",
            file=sys.stderr,
        )
        return 2
    # The benchmark's parser names itself after argv[0], and some reports quote argv[1:].
    sys.argv = [f"python -m benchmarks run {name}", *argv]
    result = bench.main()(list(argv))
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["list"] and len(args) == 1:
        print(list_benchmarks())
        return 0
    if args[:1] == ["run"] and len(args) >= 2:
        return run(args[1], args[2:])
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    print(USAGE, end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
