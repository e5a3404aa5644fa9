"""Stress of pg_textsearch's ``bm25`` index through the store: concurrent writers, ranked
searches and vacuum on one collection, with a watchdog that reports a hang.

pg_textsearch 1.0.0 (the embedded server's) can hang writers unkillably
(https://github.com/timescale/pg_textsearch/issues/370): a writing transaction holds the
index's LWLock from its first row to its commit, invisible to the deadlock detector, and a
ranked scan over a segment spilled out of order can spin for ever holding it
(https://github.com/timescale/pg_textsearch/pull/360,
https://github.com/timescale/pg_textsearch/issues/384). This benchmark runs the pattern
that leads there, with the store's guard for such servers (the default;
:mod:`parrot_parents.stores.postgres.search.bm25_guard`), with its writers' lock alone
(``--guard writers``) or without it (``--no-guard``), and says whether the index hung.

1. **A private server**: the embedded PostgreSQL in its own temporary data directory
   (``--data-dir`` to choose one; it is kept then) and its own socket there, never the
   user's default server. Autovacuum is made aggressive (1 s naptime, thresholds of 50 rows
   and 0.2 %, no cost delay) and pg_textsearch's ``memtable_spill_threshold`` is lowered to
   ``--spill-threshold`` posting entries (default 100,000; the server's own is 32 million),
   so the index spills a segment every few seconds of writes.
2. **The collection**: ``lexical_backend="pg_textsearch"`` (asked by name: on 1.0.0 it
   is given with a warning), ``--children`` children (default 100,000) of real English text
   (:func:`~benchmarks.common.english_texts`: documents of 1,500 to 4,000 characters from
   random places in it, cut by the product's hierarchy builder), with random unit vectors of
   32 dimensions (the stress is on the lexical index; no model loads).
3. **The stress**, for ``--minutes`` (default 20): ``--writers`` tasks (default 4) each
   replacing (60 %), adding (25 %) and deleting (15 %) whole documents through the store's
   public writes (``replace_documents``, ``add_documents`` of a new document, ``delete``),
   so any guard of the store is on their path; ``--searchers`` tasks (default 3) running
   ranked searches of 3 to 6 words from the text through the store, hybrid and lexical in
   turn; and a ``VACUUM`` of the collection every ``--vacuum-every`` seconds (default 20):
   without the guard a plain ``VACUUM`` on its own connection beside autovacuum, with it the
   store's ``vacuum()`` (the guard's rebuild and ``VACUUM``, under its lock; autovacuum is
   off for a guarded table).
4. **The watchdog**: its own connection reads ``pg_stat_activity`` every 3 s; a backend
   seen waiting on an ``LWLock`` at every poll for over ``--hang-after`` seconds (default
   60), or a client running one statement that long (maintenance, or a wait on a
   heavyweight lock, which can be cancelled and which the deadlock detector sees: ten
   times that), is a hang. It prints the active backends, stops the server (``pg_ctl``
   fast, then immediate, then SIGKILL to that data directory's postmaster and its children
   only: a backend waiting on an LWLock ignores cancels) and ends the run.

The report says: hang or not, after how long, the watchdog's rows, the operations done per
kind, and search latency (p50/p95) while the writers ran (before a hang). Each mode,
number of writers and VACUUM interval keeps its own section of
``benchmarks/reports/bm25_stress.md``, and a table at its top sets every run side by side.
Never run in CI or by pytest; run it alone on a shared machine (``nice -n 19``): it keeps
two cores busy for its minutes.

    python -m benchmarks run bm25_stress [--minutes M] [--children N] [--writers W]
        [--searchers S] [--no-guard | --guard auto|writers|off] [--data-dir D]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import REPORTS, command, cpu_model, english_texts, replace_section

__all__ = ["main"]

DIMENSION = 32
TABLE = "bm25_stress"
REPORT = REPORTS / "bm25_stress.md"
#: Server settings of the stress (``ALTER SYSTEM`` on the private server only).
AUTOVACUUM = {
    "autovacuum_naptime": "1s",
    "autovacuum_vacuum_threshold": "50",
    "autovacuum_vacuum_scale_factor": "0.002",
    "autovacuum_vacuum_insert_threshold": "500",
    "autovacuum_vacuum_insert_scale_factor": "0.002",
    "autovacuum_analyze_scale_factor": "0.01",
    "autovacuum_vacuum_cost_delay": "0",
}
_POLL_S = 3.0
_TITLE = """# pg_textsearch's bm25 index under concurrent writes (`bm25_stress`)

Written by `python -m benchmarks run bm25_stress` (`benchmarks/throughput/bm25_stress.py`
says what it runs); one section per mode, number of writers and VACUUM interval, each from
its own run, and this table of them all.

<!-- bm25-stress-summary:start -->
<!-- bm25-stress-summary:end -->
"""
_WORD = re.compile(r"[A-Za-z]{3,}")
_MAINTENANCE = re.compile(r"\s*(VACUUM|REINDEX|ANALYZE)\b", re.IGNORECASE)


@dataclass
class Tally:
    """What the workers did: operations and errors per kind, search latencies."""

    ops: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    #: ``(ended, milliseconds)`` of each search that returned.
    searches: list[tuple[float, float]] = field(default_factory=list)
    first_error: dict[str, str] = field(default_factory=dict)

    def failed(self, kind: str, exc: BaseException) -> None:
        self.errors[kind] += 1
        self.first_error.setdefault(kind, f"{type(exc).__name__}: {str(exc)[:200]}")


@dataclass
class Hang:
    """What the watchdog saw: the stuck backends, when their statements started."""

    seen_at: float
    started_at: float
    rows: list[dict[str, Any]]


# -- text and documents ---------------------------------------------------------------------


class Texts:
    """Documents and questions drawn from one long English text, seeded."""

    def __init__(self, seed: int) -> None:
        from parrot_parents.loaders.hierarchy import LateChunkingProcessor
        from parrot_parents.stores.records.values import clean_text

        self.text = re.sub(r"\s+", " ", clean_text(" ".join(english_texts()))[0])
        self.rng = random.Random(seed)
        self.cutter = LateChunkingProcessor(late_chunking=False)

    def document(self) -> str:
        size = self.rng.randint(1500, 4000)
        start = self.rng.randrange(0, len(self.text) - size)
        start = self.text.find(" ", start) + 1
        return self.text[start : start + size].strip()

    def question(self) -> str:
        start = self.rng.randrange(0, len(self.text) - 400)
        words = _WORD.findall(self.text[start : start + 400])
        n = self.rng.randint(3, 6)
        if len(words) <= n:
            return "python module function"
        at = self.rng.randrange(0, len(words) - n)
        return " ".join(words[at : at + n]).lower()


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIMENSION)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def write_item(texts: Texts, rng: np.random.Generator, document_id: str) -> Any:
    """A ``replace_documents`` item: the document's rows cut by the product's builder,
    children with random unit vectors, parents without."""
    documents = texts.cutter.build_hierarchy(texts.document(), document_id).documents()
    vectors = _vectors(rng, len(documents))
    embeddings = [
        v if d.metadata["is_chunk"] else None for d, v in zip(documents, vectors, strict=True)
    ]
    return (document_id, documents, embeddings, None)


# -- the private server ---------------------------------------------------------------------


def start_server(data_dir: Path, spill_threshold: int) -> Any:
    """The embedded server of ``data_dir`` (never stopped by this process's exit: the
    benchmark stops it), with the stress settings in place."""
    from parrot_parents.embedded.server import get_server

    server = get_server(data_dir, cleanup_mode=None)
    settings = {**AUTOVACUUM, "pg_textsearch.memtable_spill_threshold": str(spill_threshold)}
    for name, value in settings.items():
        # ALTER SYSTEM takes no parameters; the names and values are this module's own.
        server.psql(f"ALTER SYSTEM SET {name} = '{value}';")
    server.psql("SELECT pg_reload_conf();")
    return server


def stop_server(data_dir: Path, user: str | None = None) -> str:
    """Stop the server of ``data_dir``: ``pg_ctl`` fast, then immediate, then SIGKILL to
    its postmaster's children and the postmaster (read from that directory's
    ``postmaster.pid``; no other process is touched). Returns how it stopped."""
    import psutil
    from pgserver._commands import pg_ctl

    for mode in ("fast", "immediate"):
        try:
            pg_ctl(["-w", "-t", "15", "-m", mode, "stop"], pgdata=data_dir, user=user)
            return f"pg_ctl -m {mode}"
        except Exception:
            continue
    pid_file = data_dir / "postmaster.pid"
    if not pid_file.exists():
        return "already stopped"
    postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
    for proc in [*postmaster.children(recursive=True), postmaster]:
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    return "SIGKILL"


# -- the workers ----------------------------------------------------------------------------


async def load(store: Any, texts: Texts, children: int, seed: int) -> list[str]:
    """Write documents until the collection holds ``children`` children; their ids."""
    rng = np.random.default_rng(seed)
    ids: list[str] = []
    written, t0 = 0, time.monotonic()
    await store.connect()
    async with store.bulk_load():
        while written < children:
            batch = [write_item(texts, rng, f"d{len(ids) + i}") for i in range(50)]
            await store.replace_documents(batch)
            ids += [item[0] for item in batch]
            written += sum(d.metadata["is_chunk"] for item in batch for d in item[1])
            if len(ids) % 2000 == 0:
                print(f"  loaded {written:,} children in {time.monotonic() - t0:.0f} s", flush=True)
    return ids


async def writer(
    store: Any, texts: Texts, live: list[str], tally: Tally, stop: asyncio.Event, k: int
) -> None:
    rng = np.random.default_rng(1000 + k)
    pick = random.Random(1000 + k)
    n = 0
    while not stop.is_set():
        roll = pick.random()
        kind = "replace" if roll < 0.60 else "add" if roll < 0.85 else "delete"
        try:
            if kind == "add":
                document_id = f"w{k}-{n}"
                n += 1
                _, documents, embeddings, _ = write_item(texts, rng, document_id)
                await store.add_documents(documents, embeddings=embeddings)
                live.append(document_id)
            elif not live:
                continue
            elif kind == "replace":
                await store.replace_documents([write_item(texts, rng, pick.choice(live))])
            else:
                document_id = live.pop(pick.randrange(len(live)))
                await store.delete(document_id)
            tally.ops[kind] += 1
        except Exception as exc:
            tally.failed(kind, exc)
            await asyncio.sleep(0.2)


async def searcher(store: Any, texts: Texts, tally: Tally, stop: asyncio.Event, k: int) -> None:
    rng = np.random.default_rng(2000 + k)
    turn = k
    while not stop.is_set():
        mode = "hybrid" if turn % 2 == 0 else "lexical"
        turn += 1
        question = texts.question()
        vector = _vectors(rng, 1)[0].tolist() if mode == "hybrid" else None
        t0 = time.perf_counter()
        try:
            await store.similarity_search_by_vector(vector, 10, search_mode=mode, query=question)
            tally.searches.append((time.monotonic(), (time.perf_counter() - t0) * 1000))
            tally.ops[f"search ({mode})"] += 1
        except Exception as exc:
            tally.failed(f"search ({mode})", exc)
            await asyncio.sleep(0.2)


async def vacuumer(
    store: Any, uri: str, guard: bool, every: float, tally: Tally, stop: asyncio.Event
) -> None:
    """A VACUUM of the collection every ``every`` seconds: the store's own with the
    guard, a plain one on a separate connection without it."""
    import asyncpg

    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        if stop.is_set():
            return
        try:
            if guard:
                await store.vacuum()
            else:
                conn = await asyncpg.connect(uri)
                try:
                    await conn.execute(f'VACUUM "public"."{TABLE}"')
                finally:
                    await conn.close()
            tally.ops["vacuum"] += 1
        except Exception as exc:
            tally.failed("vacuum", exc)


_ACTIVITY = """
SELECT pid, backend_type, wait_event_type, wait_event,
       extract(epoch FROM now() - query_start)::float8 AS age, left(query, 160) AS query
FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND state = 'active' AND query_start IS NOT NULL
"""


def stuck(
    rows: list[dict[str, Any]],
    waiting: dict[tuple[int, float], float],
    now: float,
    hang_after: float,
) -> list[dict[str, Any]]:
    """The backends that make a hang: one seen waiting on an LWLock at every poll for over
    ``hang_after`` seconds (``waiting``: since when each statement has been seen waiting,
    kept across polls), or a client's statement running that long; maintenance
    (``VACUUM``, ``REINDEX``, autovacuum) and a wait on a heavyweight lock may last ten
    times as long."""
    seen = set()
    found = []
    for r in rows:
        key = (r["pid"], round(now - r["age"]))  # the statement: its backend and start
        if r["wait_event_type"] == "LWLock":
            seen.add(key)
            since = waiting.setdefault(key, now)
            if now - since > hang_after:
                found.append(r)
                continue
        # A wait on a heavyweight lock can be cancelled and is seen by the deadlock
        # detector: it is stuck only if its holder is, which is judged on its own.
        slow = (
            r["backend_type"] != "client backend"
            or _MAINTENANCE.match(r["query"])
            or r["wait_event_type"] == "Lock"
        )
        if r["age"] > hang_after * (10 if slow else 1):
            found.append(r)
    for key in set(waiting) - seen:
        del waiting[key]
    return found


async def watchdog(uri: str, hang_after: float, stop: asyncio.Event) -> Hang | None:
    """Poll ``pg_stat_activity`` every few seconds until ``stop``; a :class:`Hang` once
    :func:`stuck` finds a backend."""
    import asyncpg

    conn = await asyncpg.connect(uri)
    last_note = time.monotonic()
    waiting: dict[tuple[int, float], float] = {}
    try:
        while not stop.is_set():
            rows = [dict(r) for r in await conn.fetch(_ACTIVITY)]
            found = stuck(rows, waiting, time.monotonic(), hang_after)
            if found:
                now = time.monotonic()
                return Hang(now, now - max(r["age"] for r in found), rows)
            if time.monotonic() - last_note > 60:
                last_note = time.monotonic()
                waits = Counter(f"{r['wait_event_type']}/{r['wait_event']}" for r in rows)
                print(f"  watchdog: {len(rows)} active, waits {dict(waits)}", flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), _POLL_S)
        return None
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.close(), 5)


# -- the run --------------------------------------------------------------------------------


async def _version(uri: str) -> str:
    import asyncpg

    conn = await asyncpg.connect(uri)
    try:
        found = await conn.fetchval(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'"
        )
    finally:
        await conn.close()
    return str(found)


async def stress(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    from parrot_parents.stores.postgres import PgVectorStore
    from parrot_parents.stores.postgres.collections.schema import HNSWIndex

    server = start_server(data_dir, args.spill_threshold)
    uri = server.get_uri()
    store = PgVectorStore(
        dsn=uri,
        table=TABLE,
        dimension=DIMENSION,
        # A small graph: the dense branch is not what is stressed, and its build is quick.
        hnsw=HNSWIndex(m=8, ef_construction=32),
        lexical_backend="pg_textsearch",
        bm25_guard=args.guard,
    )
    texts = Texts(args.seed)
    t0 = time.monotonic()
    live = await load(store, texts, args.children, args.seed)
    loaded_s = time.monotonic() - t0
    children = await store.count(include_parents=False)
    version = await _version(uri)
    print(
        f"loaded {children:,} children in {loaded_s:.0f} s; stress for {args.minutes} min",
        flush=True,
    )

    tally, stop = Tally(), asyncio.Event()
    started = time.monotonic()
    tasks = [
        *[
            asyncio.create_task(writer(store, texts, live, tally, stop, k))
            for k in range(args.writers)
        ],
        *[
            asyncio.create_task(searcher(store, texts, tally, stop, k))
            for k in range(args.searchers)
        ],
        asyncio.create_task(
            vacuumer(store, uri, args.guard != "off", args.vacuum_every, tally, stop)
        ),
    ]
    dog = asyncio.create_task(watchdog(uri, args.hang_after, stop))
    done, _ = await asyncio.wait({dog}, timeout=args.minutes * 60)
    hang = dog.result() if done else None
    stopped_how = None
    if hang is not None:
        print(f"HANG after {hang.started_at - started:.0f} s:", flush=True)
        for row in hang.rows:
            print(f"  {row}", flush=True)
        stopped_how = await asyncio.to_thread(stop_server, data_dir, server.system_user)
        print(f"server stopped by {stopped_how}", flush=True)
    stop.set()
    ended = time.monotonic()
    _, pending = await asyncio.wait(tasks, timeout=120)
    for task in pending:
        task.cancel()
    if not done:
        await dog
    with contextlib.suppress(Exception):
        await asyncio.wait_for(store.close(), 30)
    cutoff = hang.started_at if hang is not None else ended
    latencies = [ms for at, ms in tally.searches if at <= cutoff]
    return {
        "guard": args.guard,
        "version": version,
        "children": children,
        "load_s": loaded_s,
        "ran_s": (hang.seen_at if hang else ended) - started,
        "hang": None
        if hang is None
        else {"after_s": hang.started_at - started, "rows": hang.rows, "stopped_by": stopped_how},
        "ops": dict(tally.ops),
        "errors": dict(tally.errors),
        "first_error": tally.first_error,
        "p50": statistics.median(latencies) if latencies else None,
        "p95": float(np.percentile(latencies, 95)) if latencies else None,
        "searches": len(latencies),
    }


def report(result: dict[str, Any], args: argparse.Namespace, argv: list[str]) -> str:
    hang = result["hang"]
    ms = "n/a" if result["p50"] is None else f"{result['p50']:.1f} / {result['p95']:.1f}"
    mode = {
        "auto": "With the guard",
        "writers": "With the writers' lock alone (`--guard writers`)",
        "off": "Without the guard (`--no-guard`)",
    }[result["guard"]]
    lines = [
        f"### {mode}, {args.writers} writer{'s' if args.writers > 1 else ''}",
        "",
        f"Command: `{command(__name__, argv)}`; CPU: {cpu_model()}, {os.cpu_count()} cores "
        f"(shared); pg_textsearch {result['version']}; {result['children']:,} children loaded "
        f"in {result['load_s']:.0f} s; {args.writers} writers, {args.searchers} searchers, "
        f"VACUUM every {args.vacuum_every:.0f} s, spill threshold {args.spill_threshold:,} "
        "posting entries.",
        "",
        f"- hang: **{'yes' if hang else 'no'}**"
        + (
            f", after {hang['after_s']:.0f} s (server stopped by {hang['stopped_by']})"
            if hang
            else ""
        )
        + f"; ran {result['ran_s'] / 60:.1f} min",
        f"- operations: {', '.join(f'{k} {v:,}' for k, v in sorted(result['ops'].items()))}",
        f"- errors: {result['errors'] or 'none'}"
        + (f" (first of each: {result['first_error']})" if result["errors"] else ""),
        f"- search latency while the writers ran{' (before the hang)' if hang else ''}: "
        f"p50 / p95 **{ms} ms** over {result['searches']:,} searches",
    ]
    if hang:
        lines += ["", "The watchdog's rows (active backends when it fired):", "", "```"]
        lines += [json.dumps(r, default=str) for r in hang["rows"]]
        lines += ["```"]
    writes = sum(v for k, v in result["ops"].items() if k in ("add", "replace", "delete"))
    figures = {
        "guard": result["guard"],
        "writers": args.writers,
        "vacuum_every_s": round(args.vacuum_every),
        "hang_after_s": None if hang is None else round(hang["after_s"]),
        "minutes": round(result["ran_s"] / 60, 1),
        "writes": writes,
        "searches": result["searches"],
        "p50": None if result["p50"] is None else round(result["p50"], 1),
        "p95": None if result["p95"] is None else round(result["p95"], 1),
    }
    lines += ["", f"<!-- figures {json.dumps(figures)} -->"]
    return "\n".join(lines)


_GUARDS = {"auto": "on", "writers": "writers' lock alone", "off": "off"}
_FIGURES = re.compile(r"<!-- figures (\{.*?\}) -->")


def summary(doc: str) -> str:
    """One table of every run the report holds (read from their ``figures`` lines)."""
    rows = [json.loads(m.group(1)) for m in _FIGURES.finditer(doc)]
    rows = [r for r in rows if "vacuum_every_s" in r]
    rows.sort(key=lambda r: (r["writers"], r["vacuum_every_s"], r["guard"] != "off", r["guard"]))
    lines = [
        "| guard | writers | VACUUM every | hang | minutes | writes | searches | search p50 ms "
        "| p95 ms |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        hang = "no" if r["hang_after_s"] is None else f"**yes**, after {r['hang_after_s']} s"
        p50 = "n/a" if r["p50"] is None else f"{r['p50']:.1f}"
        p95 = "n/a" if r["p95"] is None else f"{r['p95']:.1f}"
        lines.append(
            f"| {_GUARDS.get(r['guard'], r['guard'])} | {r['writers']} | {r['vacuum_every_s']} s "
            f"| {hang} | {r['minutes']} "
            f"| {r['writes']:,} | {r['searches']:,} | {p50} | {p95} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="stress time (default 20)")
    ap.add_argument("--children", type=int, default=100_000, help="children loaded first")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--searchers", type=int, default=3)
    ap.add_argument(
        "--guard",
        choices=("auto", "writers", "off"),
        default="auto",
        help="the store's bm25_guard: auto (default), writers (its lock alone), off",
    )
    ap.add_argument(
        "--no-guard", dest="guard", action="store_const", const="off", help="--guard off"
    )
    ap.add_argument("--data-dir", type=Path, help="the private server's data directory (kept)")
    ap.add_argument("--spill-threshold", type=int, default=100_000)
    ap.add_argument("--vacuum-every", type=float, default=20.0, help="seconds between VACUUMs")
    ap.add_argument("--hang-after", type=float, default=60.0, help="seconds that make a hang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.children < 1 or args.writers < 1 or args.searchers < 0:
        ap.error("--minutes, --children and --writers must be positive, --searchers >= 0")
    given = list(argv if argv is not None else [])
    if "--out" in given:  # where the report goes is no part of the run
        at = given.index("--out")
        del given[at : at + 2]
    if "--data-dir" in given:  # a path of this machine's
        given[given.index("--data-dir") + 1] = "D"
    if args.data_dir is None:
        # Run by root, the server runs as a system user, which must enter the directory.
        scratch = Path(tempfile.mkdtemp(prefix="parrot-parents-bm25-stress-"))
        scratch.chmod(0o755)
    data_dir = args.data_dir or scratch / "data"
    try:
        result = asyncio.run(stress(args, data_dir))
    finally:
        if (data_dir / "postmaster.pid").exists():
            from parrot_parents.embedded import system_user

            stop_server(data_dir, system_user.SYSTEM_USER if system_user.runs_as_root() else None)
        if args.data_dir is None:
            shutil.rmtree(data_dir.parent, ignore_errors=True)
    body = report(result, args, given)
    print(body)
    if not args.out.exists():
        args.out.write_text(_TITLE, encoding="utf-8")
    name = f"bm25-stress-{args.guard}-w{args.writers}-v{round(args.vacuum_every)}"
    replace_section(args.out, name, body)
    replace_section(args.out, "bm25-stress-summary", summary(args.out.read_text("utf-8")))
