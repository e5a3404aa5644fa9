"""``parrot-parents ingest PATH... --collection C``: build and store the hierarchy."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any, TypedDict

from parrot_parents.cli.common import (
    TRAILING,
    add_lexical_backend_option,
    add_store_options,
    add_strategy_option,
    make_store,
    visible,
)
from parrot_parents.loaders.defaults import (
    DEFAULT_CHILD_OVERLAP,
    DEFAULT_CHILD_SIZE,
    DEFAULT_PARENT_OVERLAP,
    DEFAULT_PARENT_SIZE,
    DEFAULT_THRESHOLD,
)

if TYPE_CHECKING:
    from parrot_parents.loaders.abstract import ParentSizes
    from parrot_parents.strategies.spec import StrategySpec

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("ingest", help="ingest .txt/.md/.html/.pdf files or directories")
    p.add_argument("paths", nargs="+", help="files or directories")
    add_store_options(p)
    add_lexical_backend_option(p)
    p.add_argument(
        "--partition-key",
        metavar="KEY",
        help="give each value of this metadata key (a tenant, say) an HNSW index of its own, "
        "so that a search whose filter or bot scope fixes the key reads only that value's "
        "index, or on Milvus its partition (recorded with the collection)",
    )
    p.add_argument(
        "--filter-key",
        action="append",
        metavar="KEY",
        help="give this metadata key a B-tree index of its value and planner statistics, so "
        "that a filter on it (a range, $in, an equality) plans from an estimate and reads "
        "the rows it keeps through the index (repeatable; PostgreSQL; kept by the collection)",
    )
    p.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata every ingested document and its rows carry (repeatable; VALUE is read "
        "as JSON when it parses, else as a string, as is an integer wider than 64 bits): "
        "--metadata tenant=acme",
    )
    add_chunking_options(p)
    p.add_argument(
        "--on-bad-bytes",
        choices=["error", "replace"],
        default="error",
        help="text files with invalid bytes (UTF-8, or UTF-16/32 after a byte-order mark) or "
        "NUL bytes: report as failed, or clean",
    )
    p.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="document ids are paths relative to DIR, however PATHs are spelled (stable "
        "identity: `ingest A` and `ingest A B` then store A's files once)",
    )
    p.add_argument(
        "--id-prefix",
        default=None,
        metavar="PREFIX",
        help="prefix every document id with PREFIX (instead of the root folder's name that "
        "is added when several PATHs are given)",
    )
    add_strategy_option(p)
    p.add_argument(
        "--bulk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop the vector index during the load and build it once at the end (default: "
        "on when the collection is new or empty, or lacks its vector index; PostgreSQL)",
    )
    p.add_argument(
        "--llm-concurrency",
        type=int,
        default=4,
        help="model calls in flight at once, for the model-backed strategies (default 4)",
    )
    p.set_defaults(func=run, **{TRAILING: "paths"})


def add_size_options(p: argparse.ArgumentParser, *, parent_size: str, threshold: str) -> None:
    """``--child-size``, ``--child-overlap``, ``--parent-threshold``, ``--parent-size``,
    ``--parent-overlap`` (characters) and ``--late-chunking``; ``parent_size`` and
    ``threshold`` are the help of the two parent flags, whose defaults the command
    resolves."""
    p.add_argument(
        "--child-size",
        type=int,
        default=DEFAULT_CHILD_SIZE,
        help=f"child size in characters (default {DEFAULT_CHILD_SIZE})",
    )
    p.add_argument(
        "--child-overlap",
        type=int,
        default=DEFAULT_CHILD_OVERLAP,
        help=f"child overlap in characters (default {DEFAULT_CHILD_OVERLAP})",
    )
    p.add_argument("--parent-threshold", type=int, default=None, help=threshold)
    p.add_argument("--parent-size", type=int, default=None, help=parent_size)
    p.add_argument(
        "--parent-overlap",
        type=int,
        default=DEFAULT_PARENT_OVERLAP,
        help=f"parent_chunk overlap in characters (default {DEFAULT_PARENT_OVERLAP})",
    )
    p.add_argument(
        "--late-chunking",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="embed children with late chunking (default: on)",
    )


def add_structure_options(p: argparse.ArgumentParser) -> None:
    """``--structure`` and ``--preamble`` (unset: the loader's defaults, both on)."""
    p.add_argument(
        "--structure",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="parents follow the headings of Markdown/HTML/PDF documents and table rows "
        "become table_row children (default: on)",
    )
    p.add_argument(
        "--preamble",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="embed and index each child of a structured document with its title and "
        "section path, never returned (default: on)",
    )


def add_chunking_options(p: argparse.ArgumentParser) -> None:
    """The options that shape the rows (and so the chunk policy version); their defaults
    are the loaders' own (:mod:`parrot_parents.loaders.defaults`), as ``TextLoader()``
    has them."""
    add_size_options(
        p,
        threshold=f"documents longer than this (characters) get parent_chunks (default "
        f"{DEFAULT_THRESHOLD}, or N x child size for a strategy with a group of N)",
        parent_size=f"parent_chunk size (chars; default {DEFAULT_PARENT_SIZE}, or N x child "
        "size for a strategy with a group of N)",
    )
    add_structure_options(p)
    p.add_argument(
        "--document-layer",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add one extractive overview row per structured document (default: off)",
    )


class LoaderOptions(TypedDict, total=False):
    """The :class:`~parrot_parents.loaders.text.TextLoader` keywords of the chunking
    options; a flag that was not given is absent (the loader's default)."""

    child_chunk_size: int
    child_chunk_overlap: int
    late_chunking: bool
    section_parents: bool
    preamble: bool
    document_layer: bool


def loader_options(args: argparse.Namespace) -> LoaderOptions:
    """Loader keyword arguments of the chunking options that were given."""
    kwargs: LoaderOptions = {
        "child_chunk_size": args.child_size,
        "child_chunk_overlap": args.child_overlap,
    }
    if args.late_chunking is not None:
        kwargs["late_chunking"] = args.late_chunking
    if args.structure is not None:
        kwargs["section_parents"] = args.structure
    if args.preamble is not None:
        kwargs["preamble"] = args.preamble
    if args.document_layer is not None:
        kwargs["document_layer"] = args.document_layer
    return kwargs


def parent_sizes(args: argparse.Namespace, spec: StrategySpec | None = None) -> ParentSizes:
    """The parent sizes given, else those of the strategy's group, else the defaults."""
    group = spec.parent_size(args.child_size) if spec is not None else None
    return {
        "parent_chunk_threshold_tokens": args.parent_threshold or group or DEFAULT_THRESHOLD,
        "parent_chunk_size_tokens": args.parent_size or group or DEFAULT_PARENT_SIZE,
        "parent_chunk_overlap_tokens": args.parent_overlap,
    }


#: The bar counts documents in fractions (a long document advances as its children are
#: embedded), so its count is shown with one decimal.
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total_fmt} doc [{elapsed}<{remaining}]"


class _BarProgress:
    """The ingest's :class:`~parrot_parents.loaders.progress.IngestProgress` on a tqdm
    bar: the stage in its description, the embedding as its count; the documents stored
    are counted for the message of an interrupted ingest."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.stored_documents = 0

    def stage(self, name: str) -> None:
        from parrot_parents.loaders.progress import EMBEDDING

        self.bar.set_description_str("ingest" if name == EMBEDDING else f"ingest ({name})")

    def advance(self, documents: float) -> None:
        self.bar.update(documents)
        if self.bar.n >= self.bar.total - 1e-9:
            self.bar.set_description_str("ingest (writing)")  # the last batch's commit

    def stored(self, documents: int) -> None:
        self.stored_documents += documents


def document_metadata(pairs: list[str]) -> dict[str, Any]:
    """``--metadata KEY=VALUE`` pairs as one dict: VALUE as JSON when it parses (``2024``,
    ``true``), else the string itself (so is an integer wider than 64 bits).

    Raises:
        ConfigurationError: a pair without ``=`` or with an empty key, or a key the
            hierarchy writes (``document_id``, ``is_chunk``...), or a key given twice.
    """
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.loaders.hierarchy import HIERARCHY_OWNED
    from parrot_parents.strict_json import loads_strict

    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"--metadata needs KEY=VALUE, got {pair!r}")
        if key in HIERARCHY_OWNED:
            raise ConfigurationError(f"--metadata {key!r} is a key the hierarchy writes")
        if key in found:
            raise ConfigurationError(f"--metadata {key!r} is given twice")
        try:
            value = loads_strict(raw)
        except ValueError:  # NaN and Infinity too: they are not JSON
            value = raw
        # An integer wider than 64 bits is an identifier, not a number a filter compares.
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            value = raw
        found[key] = value
    return found


def partition_value_warning(key: str | None, metadata: dict[str, Any]) -> str | None:
    """Why the documents of this ingest get no index of their own under the partition key
    ``key`` (no value given, or one of a type that gets none); None when they do."""
    import json

    from parrot_parents.stores.partition_keys import is_partition_value

    if key is None:
        return None
    if key not in metadata:
        return (
            f"--partition-key {key} without --metadata {key}=VALUE: these documents carry no "
            f"value of {key}, so they get no index of their own"
        )
    value = metadata[key]
    if is_partition_value(value):
        return None
    shown = json.dumps(value, ensure_ascii=False)
    return (
        f"{key} {shown} gets no index of its own: only a string, an integer (64 bits) or a "
        f"boolean does; a search fixing {key} to it reads the whole collection's index, "
        f"filtered (a string gets one: --metadata '{key}=\"{shown}\"')"
    )


async def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from parrot_parents.cli.common import describe_strategy
    from parrot_parents.loaders.abstract import wants_bulk_load
    from parrot_parents.loaders.text import TextLoader
    from parrot_parents.strategies.build import free_report, indexer_for
    from parrot_parents.strategies.spec import strategy_for

    extra = document_metadata(args.metadata)
    unindexed = partition_value_warning(args.partition_key, extra)
    if unindexed is not None:
        print(f"warning: {unindexed}", file=sys.stderr)
    store = make_store(args)  # not connected: nothing is loaded yet
    spec = strategy_for(args.strategy, store)  # a bad spec fails before any work
    sizes = parent_sizes(args, spec)
    indexer = indexer_for(spec, concurrency=args.llm_concurrency)
    loader = TextLoader(
        args.paths,
        on_bad_bytes=args.on_bad_bytes,
        root=args.root,
        id_prefix=args.id_prefix,
        embedding=store.embedding,
        indexer=indexer,
        **loader_options(args),
    )
    try:
        docs = loader.load()
        for doc in docs:
            doc.metadata.update(extra)
        with tqdm(
            total=len(docs),
            unit="doc",
            desc="ingest (connecting)",
            file=sys.stderr,
            bar_format=BAR_FORMAT,
        ) as bar:
            events = _BarProgress(bar)
            bulk = await wants_bulk_load(store, args.bulk) if docs else False
            bar.set_description_str("ingest (splitting)")
            try:
                report = await loader.ingest(
                    store, documents=docs, progress=events, bulk_load=bulk, **sizes
                )
            except asyncio.CancelledError:
                # Ctrl-C: say what is stored. Each document is written whole or not at all.
                print(
                    f"\ninterrupted: at least {events.stored_documents} of {len(docs)} "
                    "document(s) were stored, each one whole; running the same command again "
                    "is safe",
                    file=sys.stderr,
                )
                args.interruption_reported = True
                raise
    finally:
        await store.close()
        if indexer is not None:
            await indexer.close()
    keyed = getattr(store, "partition_key", None)
    if args.partition_key is None and keyed is not None:
        # The collection's own key, known once connected: its values are checked alike.
        unindexed = partition_value_warning(keyed, extra)
        if unindexed is not None:
            print(f"warning: {unindexed}", file=sys.stderr)
    lifecycle = getattr(store, "lifecycle", None)
    if getattr(lifecycle, "gave_partition_key", False):
        # Said out loud: no command takes a collection's partition key away again.
        print(
            f"note: collection {args.collection!r} is now partitioned by "
            f"{args.partition_key!r}, for good: the key is recorded with the collection and "
            "can be neither removed nor changed; each value of it gets indexes of its own",
            file=sys.stderr,
        )
    unchanged = report.unchanged
    skipped = f"; {len(unchanged)} unchanged, skipped" if unchanged else ""
    print(
        f"ingested {report.documents} document(s) into {args.collection!r}: "
        f"{report.parents} parent row(s), {report.children} child row(s)"
        + (f", {report.indexed} indexed row(s)" if indexer is not None else "")
        + skipped
    )
    if report.index_build_seconds is not None:
        print(f"built the vector index in {report.index_build_seconds:.1f} s (bulk load)")
    if args.strategy is not None or indexer is not None:
        print(
            describe_strategy(report.strategy or free_report(spec, report.children, report.parents))
        )
        if not spec.indexes_rows:
            flags = " ".join(
                f"--mode {v}" if k == "mode" else ("--expand" if v else "--no-expand")
                for k, v in spec.retrieval_overrides().items()
            )
            print(f"query it with: parrot-parents ask {flags} (a query-time mode)")
    # A file name may hold a newline or a terminal escape: each message stays one line.
    for path in unchanged:
        print(
            f"unchanged: {visible(path)}: same content, metadata and chunk policy as stored,"
            " skipped",
            file=sys.stderr,
        )
    for path, warnings in loader.report.warnings.items():
        for w in warnings:
            print(f"warning: {visible(path)}: {w}", file=sys.stderr)
    if loader.report.windowed_children:
        print(
            f"note: {loader.report.windowed_children} child(ren) exceed the model's token "
            "window and were embedded in overlapping windows",
            file=sys.stderr,
        )
    for path, reason in loader.report.failed.items():
        print(f"error: {visible(path)}: {reason}", file=sys.stderr)
    return 1 if loader.report.failed else 0
