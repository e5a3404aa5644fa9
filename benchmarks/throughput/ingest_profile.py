# ruff: noqa: E501 - the Markdown tables are written as they appear
"""Ingest throughput with the defaults, this tree against an older checkout, and where the
wall time goes.

Corpus (deterministic, offline, no shared benchmark text): English text shipped with the
Python this runs on, in a fixed order: the language reference's topics
(``pydoc_data.topics``, sorted by name), then the long descriptions of every installed
distribution (``*.dist-info/METADATA`` after its header, sorted by path), then the
docstrings of the standard library's modules, classes and functions (files sorted by
path), then the README, NEWS, FAQ and ``.md``/``.txt``/``.rst`` files of
``/usr/share/doc`` (sorted by path, gzip opened, changelogs and copyright files left out). The text is cut at paragraph breaks into ``--files`` Markdown files of equal size
adding up to ``--chars`` characters (default 40 files, 4,000,000 characters), written to
``.bench/ingest_profile/corpus`` (git-ignored). ``--fraction F`` ingests the first
``F`` of each file only, cut at a paragraph break (a shorter run on the same mix of text).

Each checkout ingests the corpus in a child process with the defaults, as ``parrot-parents
ingest`` does: ``TextLoader(files)`` (strategy ``contextual:extractive``, late chunking
on), ``chunk_documents(..., bulk_load=True)`` into a fresh ``PgVectorStore`` collection
of the embedded PostgreSQL (or ``PARROT_PARENTS_DSN``), dropped afterwards. The checkouts
alternate (old, new, new, old, ...) ``--rounds`` times; medians are reported.

Tokens are the corpus's own tokens (the model's tokenizer, no special tokens), counted
once, the same for both; tokens/s = tokens / ingest wall time (the model's load excluded).
Inside each ingest the child times, without changing the product code's behaviour:

* ``forward``: the transformer's forward passes (forward hooks on the model), summed over
  the threads that run them (the writer's and the model's stage can overlap);
* ``tokenizer``: calls of the fast tokenizer (its class's ``__call__``, wrapped);
* ``database``: the store's writes (``replace_documents`` / ``replace_document``), less
  the embedding the store does inside them (``_embed_missing``), and the index build;
* ``rest``: wall time minus the three (Python work: splitting, rows, pooling, copies).
  The model's stage and the database's run concurrently (a bounded queue), so a share
  can overlap another; ``rest`` is then an underestimate.

A third run ingests with this tree and ``late_chunking=False`` (the row alone: one reading
of each text). The model alone: the same text cut into ~1000-character pieces, embedded with
``embed_documents`` (batches of 32), in tokens/s.

    python -m benchmarks run ingest_profile --src /path/to/old/checkout [--fraction 0.1]

Writes ``benchmarks/reports/ingest_profile.md`` and the marked section of
``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import (
    REPO_ROOT,
    REPORTS,
    child,
    command,
    commit_of,
    english_texts,
    machine,
    replace_section,
)

__all__ = ["build_corpus", "main"]

CORPUS = REPO_ROOT / ".bench" / "ingest_profile" / "corpus"
PERFORMANCE = REPO_ROOT / "docs" / "performance.md"


# -- the corpus ------------------------------------------------------------------------------


def build_corpus(dest: Path, chars: int = 4_000_000, files: int = 40) -> list[Path]:
    """Write the corpus (``files`` Markdown files, ``chars`` characters in all, cut at
    paragraph breaks) to ``dest`` and return the paths, sorted. Deterministic for one
    Python installation."""
    text = re.sub(r"\n{3,}", "\n\n", "\n\n".join(english_texts()))
    if len(text) < chars:
        raise SystemExit(f"only {len(text):,} characters of text found, {chars:,} wanted")
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.md"):
        old.unlink()
    size, start, out = chars // files, 0, []
    for i in range(files):
        end = min(len(text), start + size)
        cut = text.rfind("\n\n", start + size // 2, end) if i < files - 1 else -1
        end = cut if cut > 0 else end
        path = dest / f"part{i:02d}.md"
        path.write_text(text[start:end].strip() + "\n", encoding="utf-8")
        out.append(path)
        start = end
    return out


def _heads(files: list[Path], fraction: float) -> list[Path]:
    """The first ``fraction`` of each file (cut at a paragraph break), written beside the
    corpus; the paths."""
    dest = CORPUS.parent / "heads"
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.md"):
        old.unlink()
    out = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        end = int(len(text) * fraction)
        cut = text.rfind("\n\n", end // 2, end)
        head = dest / path.name
        head.write_text(text[: cut if cut > 0 else end].strip() + "\n", encoding="utf-8")
        out.append(head)
    return out


# -- one ingest (child process) --------------------------------------------------------------


async def _ingest(files: list[str], late_chunking: bool = True) -> dict[str, Any]:
    import torch

    from parrot_parents.loaders.text import TextLoader
    from parrot_parents.stores.postgres import PgVectorStore

    store = PgVectorStore(table=f"ingest_profile_{uuid.uuid4().hex[:8]}")
    loader = TextLoader(files, embedding=store.embedding, late_chunking=late_chunking)
    loader.processor.warm_up()  # the model's load is not ingest time
    model = store.embedding.model
    timers = {"forward": 0.0, "tokenizer": 0.0, "write": 0.0, "store_embed": 0.0}
    calls = {"forward": 0}

    # Per thread: the model's stage and the store's writer may run the model at once.
    local = threading.local()

    def pre(module: Any, args: Any) -> None:
        depth = getattr(local, "depth", 0)
        if depth == 0:
            local.start = time.perf_counter()
            calls["forward"] += 1
        local.depth = depth + 1

    def post(module: Any, args: Any, output: Any) -> None:
        local.depth -= 1
        if local.depth == 0:
            timers["forward"] += time.perf_counter() - local.start

    # The late pass runs the transformer itself; encode() runs it through its module.
    for module in (model[0], model[0].auto_model):
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)
    tok_class = type(model[0].tokenizer)
    tok_call = tok_class.__call__

    def timed_call(self: Any, *a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return tok_call(self, *a, **k)
        finally:
            timers["tokenizer"] += time.perf_counter() - t0

    tok_class.__call__ = timed_call  # type: ignore[method-assign]

    def timed_async(owner: Any, name: str, key: str) -> None:
        inner = getattr(owner, name, None)
        if inner is None:
            return

        async def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await inner(*a, **k)
            finally:
                timers[key] += time.perf_counter() - t0

        setattr(owner, name, wrapper)

    timed_async(store, "replace_documents", "write")
    timed_async(store, "replace_document", "write")
    timed_async(store, "_embed_missing", "store_embed")
    await store.connect()
    docs = loader.load()
    tokenizer = model.tokenizer
    timers["tokenizer"] = 0.0
    tokens = sum(
        len(ids)
        for ids in tok_call(
            tokenizer, [d.page_content for d in docs], add_special_tokens=False, verbose=False
        )["input_ids"]
    )
    timers.update(forward=0.0, tokenizer=0.0)
    calls["forward"] = 0
    start = time.perf_counter()
    rows = await loader.chunk_documents(docs, vector_store=store, bulk_load=True)
    wall = time.perf_counter() - start
    spent = dict(timers)  # before the model-alone run below adds to them
    forward_calls = calls["forward"]
    build = float(loader.report.index_build_seconds or 0.0)
    await store.drop()
    await store.close()
    # The model alone on the same text, ~1000-character pieces.
    pieces = [
        d.page_content[i : i + 1000] for d in docs for i in range(0, len(d.page_content), 1000)
    ]
    t0 = time.perf_counter()
    with torch.no_grad():
        store.embedding.embed_documents(pieces)
    alone = time.perf_counter() - t0
    piece_tokens = sum(
        len(ids) for ids in tok_call(tokenizer, pieces, add_special_tokens=False)["input_ids"]
    )
    database = spent["write"] - spent["store_embed"] + build
    return {
        "documents": len(docs),
        "rows": len(rows),
        "tokens": tokens,
        "wall_s": wall,
        "forward_s": spent["forward"],
        "forward_calls": forward_calls,
        "tokenizer_s": spent["tokenizer"],
        "database_s": database,
        "store_embed_s": spent["store_embed"],
        "rest_s": wall - spent["forward"] - spent["tokenizer"] - database,
        "model_alone_tps": piece_tokens / alone,
        "torch_threads": torch.get_num_threads(),
    }


def _spawn(src: Path | None, files: list[Path], late: bool = True) -> dict[str, Any]:
    argv = ["--worker", *([] if late else ["--no-late-chunking"]), *map(str, files)]
    cmd, env = child(__name__, argv, src)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the ingest of {src or 'this tree'} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- the report ------------------------------------------------------------------------------


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def report(
    args: argparse.Namespace, res: dict[str, list[dict[str, Any]]], files: list[Path]
) -> str:
    old, new = res["old"], res["new"]
    chars = sum(len(p.read_text(encoding="utf-8")) for p in CORPUS.glob("*.md"))
    used = sum(len(p.read_text(encoding="utf-8")) for p in files)
    tps = {k: _median(v, "tokens") / _median(v, "wall_s") for k, v in res.items()}
    argv = ["--src", args.src, "--rounds", str(args.rounds)]
    if args.fraction < 1:
        argv += ["--fraction", str(args.fraction)]
    lines = [
        f"`{command(__name__, argv)}`, one run, the checkouts alternating, {args.rounds} "
        f"round(s), medians. Machine: {machine()}; shared with other work.",
        "",
        f"Corpus: {len(list(CORPUS.glob('*.md')))} files, {chars:,} characters of English text built by "
        f"`build_corpus` (the module docstring says from what); ingested: {used:,} "
        f"characters (`--fraction {args.fraction}` of each file), {int(_median(new, 'tokens')):,} "
        f"tokens, {_median(new, 'documents'):.0f} documents.",
        "",
        "| checkout | ingest wall s | tokens/s | forward s (calls) | tokenizer s | database s | rest (Python) s | model alone tokens/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in (
        ("old", f"old ({commit_of(args.src)})"),
        ("new", "new (this tree)"),
        ("new_off", "new, `late_chunking=False`"),
    ):
        runs = res[key]
        wall = _median(runs, "wall_s")

        def share(name: str, wall: float = wall, runs: list[dict[str, Any]] = runs) -> str:
            value = _median(runs, name)
            return f"{value:.1f} ({value / wall:.0%})"

        lines.append(
            f"| {label} | {wall:.1f} | **{tps[key]:,.0f}** | {share('forward_s')} "
            f"({_median(runs, 'forward_calls'):.0f}) | {share('tokenizer_s')} | "
            f"{share('database_s')} | {share('rest_s')} | {_median(runs, 'model_alone_tps'):,.0f} |"
        )
    lines += [
        "",
        f"- New / old: **{tps['new'] / tps['old']:.2f}×** tokens/s; new with late chunking "
        f"off / old: **{tps['new_off'] / tps['old']:.2f}×**.",
        f"- The model's forward passes: {_median(old, 'forward_s') / _median(old, 'wall_s'):.0%} "
        f"of the old ingest's wall time, {_median(new, 'forward_s') / _median(new, 'wall_s'):.0%} "
        "of the new one's. Of the old one's, "
        f"{_median(old, 'store_embed_s'):.1f} s were the store embedding the indexed rows "
        "at write time (inside the database's stage, counted under forward and tokenizer, "
        "not database).",
        "- The stages overlap (the model embeds batch k+1 while batch k is written), so the "
        "shares can add up to more than 100 % and `rest` is a lower bound.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks run ingest_profile", description=__doc__)
    p.add_argument("--src", help="the old checkout (needed unless --worker)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--chars", type=int, default=4_000_000)
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--fraction", type=float, default=1.0)
    p.add_argument("--report", default=str(REPORTS / "ingest_profile.md"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-late-chunking", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(asyncio.run(_ingest(args.paths, not args.no_late_chunking))), flush=True)
        return
    if not args.src:
        p.error("--src is needed: the old checkout to compare against")
    files = build_corpus(CORPUS, args.chars, args.files)
    if args.fraction < 1:
        files = _heads(files, args.fraction)
    res: dict[str, list[dict[str, Any]]] = {"old": [], "new": [], "new_off": []}
    order = [("old", Path(args.src), True), ("new", None, True), ("new_off", None, False)]
    for i in range(args.rounds):
        for key, src, late in order if i % 2 == 0 else order[::-1]:
            res[key].append(_spawn(src, files, late))
            print(key, json.dumps(res[key][-1]), flush=True)
    body = report(args, res, files)
    Path(args.report).write_text(
        "# Ingest throughput and profile\n\n" + body + "\n", encoding="utf-8"
    )
    replace_section(
        PERFORMANCE, "ingest-profile", body, heading="## Ingest: throughput and where the time goes"
    )
    print(body)
