"""Reliability figures for docs/reliability.md: hostile inputs, concurrent load, an outage.

Runs on a private embedded PostgreSQL (pgserver) in a temporary directory, deleted after:

1. **Inputs by kind**: seeded random documents (NUL, control characters, lone surrogates,
   huge lines, empty sections, repeated text, random child sizes and overlaps, metadata
   that is not JSON) through ``TextLoader.chunk_documents``; checks exact offsets,
   children inside parents, full coverage, and that only the bad-metadata documents fail.
2. **Concurrent load**: searchers and writers at once on one collection (writers replace
   one document again and again, concurrently); counts errors and versions left.
3. **Outage**: the server is stopped and restarted under a loop of searches; counts what
   the searchers saw before, during and after.
4. **Crash**: one backend is killed with SIGKILL under a loop of searches (PostgreSQL then
   ends every connection and replays its log); counts what the searchers saw, and how long
   after the kill the first search succeeded.
5. **Two data directories**: how long one process takes to start a server while another
   holds the lock of another data directory (and pgserver's machine-wide lock), against
   the same start with no lock held.

    python -m benchmarks run reliability [--out benchmarks/reports/reliability.md] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from benchmarks.common import REPORTS, command
from parrot_parents.errors import StoreError
from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.records.values import clean_text

KINDS = ["nul", "control", "surrogate", "huge_line", "empty_sections", "repeated", "bad_meta"]


class _NoModel:
    """Structure only: the input fuzz never embeds."""


def _document(rng: random.Random, kind: str) -> tuple[str, dict[str, Any]]:
    words = ["pay", "day", "is", "the", "25th.", "Overtime", "follows,", "é", "😀", "שלום"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 25))) for _ in range(12)]
    meta: dict[str, Any] = {"year": rng.randint(1990, 2030)}
    if kind == "nul":
        lines = [line.replace(" ", "\x00", 1) for line in lines]
    elif kind == "control":
        lines = [line + "\x07\x1b\x85" for line in lines]
    elif kind == "surrogate":
        lines.insert(rng.randrange(len(lines)), "math \ud835 symbol")
    elif kind == "huge_line":
        lines.append("x" * rng.randint(2000, 20000))
    elif kind == "empty_sections":
        lines = [line if rng.random() < 0.5 else "## Heading\n\n\n" for line in lines]
    elif kind == "repeated":
        lines = lines[:3] * rng.randint(3, 8)
    elif kind == "bad_meta":
        meta["tags"] = rng.choice([{"a"}, float("nan"), object(), "bad\x00"])
    return "\n".join(lines), meta


async def fuzz_inputs(n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    tried: Counter[str] = Counter()
    problems = 0
    rows_checked = 0
    for start in range(0, n, 8):
        size = rng.randint(20, 600)
        overlap = rng.randint(0, size - 1) if rng.random() < 0.7 else 0
        loader = TextLoader(
            child_chunk_size=size,
            child_chunk_overlap=overlap,
            embedding=_NoModel(),  # type: ignore[arg-type]
        )
        batch = []
        for i in range(start, min(start + 8, n)):
            kind = KINDS[i % len(KINDS)]
            tried[kind] += 1
            text, meta = _document(rng, kind)
            batch.append((kind, text, Document(text, metadata={**meta, "document_id": f"d{i}"})))
        rows = await loader.chunk_documents(
            [d for *_, d in batch], parent_chunk_threshold_tokens=rng.choice([500, 16000])
        )
        by_doc: dict[str, list[Document]] = {}
        for r in rows:
            by_doc.setdefault(r.metadata["document_id"], []).append(r)
        for kind, text, doc in batch:
            name = doc.metadata["document_id"]
            if kind == "bad_meta":
                problems += name not in loader.report.failed or name in by_doc
                continue
            cleaned = clean_text(text)[0]
            mine = by_doc.get(name, [])
            problems += name in loader.report.failed or (bool(cleaned.strip()) != bool(mine))
            parents = {r.id: r for r in mine if not r.metadata["is_chunk"]}
            covered = [False] * len(cleaned)
            for r in mine:
                rows_checked += 1
                s, e = r.metadata["start_index"], r.metadata["end_index"]
                problems += cleaned[s:e] != r.page_content
                if r.metadata["is_chunk"]:
                    p = parents[r.metadata["parent_document_id"]].metadata
                    problems += not (p["start_index"] <= s and e <= p["end_index"])
                    for j in range(s, e):
                        covered[j] = True
            problems += not all(c or ch.isspace() for c, ch in zip(covered, cleaned, strict=True))
    return {"tried": dict(tried), "rows_checked": rows_checked, "problems": problems}


def _vector(rng: random.Random, dim: int) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(dim)]


async def concurrent_load(
    store: PgVectorStore, searchers: int, searches: int, writers: int, writes: int
) -> dict[str, Any]:
    rng = random.Random(1)
    dim = store.dimension
    docs = [Document(f"row {i} about pay and leave", metadata={"year": i}) for i in range(300)]
    await store.add_documents(docs, embeddings=[_vector(rng, dim) for _ in docs])
    proc = LateChunkingProcessor(embedding=store.embedding)
    errors: Counter[str] = Counter()
    done = Counter[str]()

    async def search(k: int) -> None:
        r = random.Random(k)
        for _ in range(searches):
            try:
                await store.similarity_search_by_vector(
                    _vector(r, dim), limit=10, filter={"year": {"$gte": r.randint(0, 300)}}
                )
                done["search"] += 1
            except Exception as exc:
                errors[type(exc).__name__] += 1

    async def write(k: int) -> None:
        for j in range(writes):
            h = proc.build_hierarchy(f"Version {k}-{j}. " * (20 + k * 7), "shared")
            docs = h.documents()
            vecs = [None if not d.metadata["is_chunk"] else _vector(rng, dim) for d in docs]
            try:
                await store.replace_document("shared", docs, embeddings=vecs)
                done["write"] += 1
            except Exception as exc:
                errors[type(exc).__name__] += 1

    t = time.perf_counter()
    await asyncio.gather(
        *[search(k) for k in range(searchers)], *[write(k) for k in range(writers)]
    )
    elapsed = time.perf_counter() - t
    rows = (await store.fetch_chunk_ranges([("shared", 0, 100_000)]))["shared"]
    versions = {r.content.split(".")[0] for r in rows}
    return {
        "searchers": searchers,
        "writers": writers,
        "searches": done["search"],
        "writes": done["write"],
        "errors": dict(errors),
        "seconds": elapsed,
        "versions_left": len(versions),
    }


async def _search_loop(
    store: PgVectorStore, log: list[tuple[float, float, str]], stop: asyncio.Event
) -> None:
    """Search until ``stop`` is set, logging ``(started, ended, outcome)`` of each search."""
    query = [1.0] + [0.0] * (store.dimension - 1)
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            await store.similarity_search_by_vector(query, limit=5)
            kind = "ok"
        except StoreError as exc:
            kind = "StoreError(unavailable)" if exc.unavailable else "StoreError(other)"
        except Exception as exc:
            kind = type(exc).__name__
        log.append((t0, time.monotonic(), kind))
        await asyncio.sleep(0.005)


async def outage(server: Any, store: PgVectorStore, searchers: int) -> dict[str, Any]:
    from pgserver._commands import pg_ctl

    log: list[tuple[float, float, str]] = []
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_search_loop(store, log, stop)) for _ in range(searchers)]
    await asyncio.sleep(1.0)
    stopping = time.monotonic()
    await asyncio.to_thread(
        pg_ctl, ["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user
    )
    down = time.monotonic()  # pg_ctl -w returns once the server has stopped
    await asyncio.sleep(2.0)
    restart = time.monotonic()
    await asyncio.to_thread(server.ensure_postgres_running)
    back = time.monotonic()
    await asyncio.sleep(2.0)
    stop.set()
    await asyncio.gather(*tasks)
    phases = {
        "before": [k for s, e, k in log if e < stopping],
        "stopping": [k for s, e, k in log if s < down and e >= stopping],
        "during": [k for s, e, k in log if s > down and e < restart],
        "after": [k for s, e, k in log if s > back],
    }
    return {
        "searchers": searchers,
        "down_s": restart - down,
        "restart_s": back - restart,
        "phases": {p: dict(Counter(v)) for p, v in phases.items()},
    }


async def crash(server: Any, store: PgVectorStore, searchers: int) -> dict[str, Any]:
    import signal

    import asyncpg

    log: list[tuple[float, float, str]] = []
    stop = asyncio.Event()
    tasks = [asyncio.create_task(_search_loop(store, log, stop)) for _ in range(searchers)]
    await asyncio.sleep(1.0)
    conn = await asyncpg.connect(server.get_uri())
    victim = await conn.fetchval(
        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
        " AND pid <> pg_backend_pid() ORDER BY backend_start LIMIT 1"
    )
    await conn.close()
    killed = time.monotonic()
    os.kill(int(victim), signal.SIGKILL)
    await asyncio.sleep(4.0)
    stop.set()
    await asyncio.gather(*tasks)
    spanning = [e - s for s, e, k in log if s <= killed <= e]
    first_ok = min((e for s, e, k in log if s > killed and k == "ok"), default=None)
    return {
        "searchers": searchers,
        "before": dict(Counter(k for s, e, k in log if e < killed)),
        "in_flight_at_the_kill": dict(Counter(k for s, e, k in log if s <= killed <= e)),
        "after": dict(Counter(k for s, e, k in log if s > killed)),
        "longest_in_flight_s": max(spanning, default=0.0),
        "first_ok_after_s": None if first_ok is None else first_ok - killed,
    }


def two_directories() -> dict[str, float]:
    import subprocess
    import sys

    import fasteners
    import pgserver

    from parrot_parents.embedded.server import lock_path

    root = Path(tempfile.mkdtemp(prefix="parrot-parents-dirs-"))
    start = (
        "import sys; from parrot_parents.embedded.server import embedded_dsn;"
        " embedded_dsn(sys.argv[1])"
    )

    def timed(data: Path) -> float:
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", start, str(data)], check=True, timeout=120)
        return time.monotonic() - t0

    free = timed(root / "a")
    held = [
        fasteners.InterProcessLock(str(lock_path(root / "other"))),
        fasteners.InterProcessLock(str(pgserver.PostgresServer.lock_path)),
    ]
    for lock in held:
        lock.acquire()
    try:
        busy = timed(root / "b")
    finally:
        for lock in held:
            lock.release()
    subprocess.run(["rm", "-rf", str(root)], check=False)
    return {"free_s": free, "other_locked_s": busy}


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPORTS / "reliability.md"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--documents", type=int, default=700)
    args = ap.parse_args(argv)
    from parrot_parents.embedded.server import get_server, release

    fuzz = await fuzz_inputs(args.documents, args.seed)
    data = Path(tempfile.mkdtemp(prefix="parrot-parents-reliability-")) / "data"
    server = get_server(data, cleanup_mode="delete")
    try:
        store = PgVectorStore(dsn=server.get_uri(), table=f"rel_{uuid.uuid4().hex[:8]}")
        load = await concurrent_load(store, searchers=16, searches=60, writers=4, writes=15)
        out = await outage(server, store, searchers=8)
        crashed = await crash(server, store, searchers=8)
        await store.close()
    finally:
        release(data)
    dirs = await asyncio.to_thread(two_directories)
    lines = [
        "# Reliability figures",
        "",
        f"Machine: {os.cpu_count()} cores; private embedded PostgreSQL 18 + pgvector; "
        f"seed {args.seed}. Command: `{command(__name__)}`",
        "",
        "## 1. Inputs by kind (TextLoader.chunk_documents, structure and checks, no model)",
        "",
        "| kind | documents |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in fuzz["tried"].items()],
        "",
        f"Rows checked: {fuzz['rows_checked']}; problems found (wrong offset, child outside "
        f"its parent, uncovered text, a good document lost or a bad one stored): "
        f"**{fuzz['problems']}**.",
        "",
        "## 2. Concurrent load on one collection",
        "",
        f"{load['searchers']} searchers (filtered vector search, limit 10) and "
        f"{load['writers']} writers replacing the same document concurrently: "
        f"{load['searches']} searches and {load['writes']} replaces in "
        f"{load['seconds']:.1f} s; errors: **{sum(load['errors'].values())}**"
        f"{' ' + str(load['errors']) if load['errors'] else ''}; "
        "versions of the shared document left: "
        f"**{load['versions_left']}**.",
        "",
        "## 3. Server stopped and restarted under searches",
        "",
        f"{out['searchers']} searchers in a loop; server down {out['down_s']:.1f} s, "
        f"restart took {out['restart_s']:.1f} s.",
        "",
        "Phases: before the stop; while `pg_ctl stop` ran; while the server was down; "
        "requests started after the restart returned.",
        "",
        "| phase | outcomes |",
        "|---|---|",
        *[f"| {p} | {v} |" for p, v in out["phases"].items()],
        "",
        "## 4. A backend killed (SIGKILL) under searches",
        "",
        f"{crashed['searchers']} searchers in a loop; one client backend killed with "
        "SIGKILL, so the server ended every connection and replayed its log. The first "
        f"search to succeed after the kill ended {crashed['first_ok_after_s']:.2f} s after "
        f"it; the longest search in flight at the kill took "
        f"{crashed['longest_in_flight_s']:.2f} s (it waited for the recovery).",
        "",
        "| searches | outcomes |",
        "|---|---|",
        f"| ended before the kill | {crashed['before']} |",
        f"| in flight at the kill | {crashed['in_flight_at_the_kill']} |",
        f"| started after the kill | {crashed['after']} |",
        "",
        "## 5. Two data directories at once",
        "",
        f"A process started the server of a new data directory in {dirs['free_s']:.2f} s; "
        "another new one while this process held another data directory's lock and "
        f"pgserver's machine-wide lock: {dirs['other_locked_s']:.2f} s.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
