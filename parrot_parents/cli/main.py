"""Entry point of the ``parrot-parents`` command (also ``python -m parrot_parents``)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
import warnings

from parrot_parents import __version__
from parrot_parents.cli.common import TRAILING

__all__ = ["build_parser", "main", "parse"]

# Each module registers one command (or group) with a ``register(subparsers)`` function.
COMMAND_MODULES = [
    "parrot_parents.cli.ingest",
    "parrot_parents.cli.ask",
    "parrot_parents.cli.eval",
    "parrot_parents.cli.compare",
    "parrot_parents.cli.plot",
    "parrot_parents.cli.migrate",
    "parrot_parents.cli.bots",
    "parrot_parents.cli.serve",
    "parrot_parents.cli.backfill",
    "parrot_parents.cli.reindex",
    "parrot_parents.cli.show",
    "parrot_parents.cli.doctor",
    "parrot_parents.cli.collections",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parrot-parents",
        description="Parent-child retrieval on PostgreSQL + pgvector.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _quiet() -> None:
    # Model loading libraries are chatty; users want the command's output.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers reads this one too, when it is imported (never for --help).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore")
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)


def _exit_on_termination() -> None:
    """Turn SIGTERM and SIGHUP (``timeout``, systemd, ``docker stop``, a closed terminal)
    into a normal exit, so that exit handlers run: the embedded server stops with its last
    live user instead of running on. Python's default for them ends the process at once."""
    import signal

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):  # SIGHUP does not exist on Windows
            signal.signal(getattr(signal, name), leave)


#: Exit status after the reader of stdout went away (``show ... | head``): 128 + SIGPIPE,
#: what the shell reports for a program that SIGPIPE ended.
BROKEN_PIPE_EXIT = 141


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; errors print one line (``--debug`` for a traceback). Returns the exit code.

    When stdout's reader closes early (``parrot-parents show ... | head``) the command
    ends quietly with :data:`BROKEN_PIPE_EXIT`, whatever it was printing.
    """
    try:
        try:
            return _main(argv)
        finally:
            # Output still buffered is written here, inside the guard, not at exit.
            sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return BROKEN_PIPE_EXIT


def _discard_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's own flush at exit
    finds no closed pipe (the recipe of Python's signal module documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing is flushed to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that a command's list of positionals may also
    follow its options (:data:`~parrot_parents.cli.common.TRAILING`). Exits with status 2
    on a bad line, as argparse does."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        trailing = vars(args).get(TRAILING)
        flags = [a for a in extra if a.startswith("-")]
        if trailing is None or flags:
            # Words the command's list would take are not named among the unknown.
            parser.error(
                f"unrecognized arguments: {' '.join(extra if trailing is None else flags)}"
            )
        getattr(args, trailing).extend(extra)
    return args


def _main(argv: list[str] | None) -> int:
    _quiet()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, not only before the command.
    debug = "--debug" in argv
    args = parse(parser, [a for a in argv if a != "--debug"])
    args.debug = debug
    _exit_on_termination()
    try:
        code = asyncio.run(args.func(args))
    except KeyboardInterrupt:
        # A command that already said what its interruption left (ingest) is not
        # followed by a second, bare line.
        if not getattr(args, "interruption_reported", False):
            print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:
        if args.debug:
            raise
        from parrot_parents.errors import ParrotParentsError

        kind = "error" if isinstance(exc, ParrotParentsError) else type(exc).__name__
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"parrot-parents: {kind}: {message}", file=sys.stderr)
        return 2
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
