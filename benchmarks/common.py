"""Code that more than one benchmark uses; a benchmark's own parts live beside it.

* **Paths**: the repository root, the report folder, the shared dev set.
* **Commands**: the command line a report prints (:func:`command`), and the child process
  that runs a benchmark on another checkout's product code (:func:`child`).
* **Documents**: :func:`replace_section` writes a table between its markers.
* **Text**: :func:`english_texts`, English text found offline on this machine.
* **Machine**: :func:`machine`, one line on the cores, CPU, torch and platform.
* **Eval rows**: a row is one ``parrot-parents eval`` command line, parsed by the CLI's
  parser and run by the CLI's code in this process (:class:`Row`, :func:`run_row`).
* **Spans**: :func:`cut_on_whitespace`, the late-chunking benchmarks' children.
* **Peers**: the peer retrievers of the quality tables, run on the shared dev set
  (:func:`bm25_dense_rrf`, :func:`langchain_parent_document`,
  :func:`llamaindex_auto_merging`). Each ingests the corpora itself, answers every question
  and returns a run: ``{qid: [(corpus_id, start, end), ...]}`` in rank order, character
  offsets into the corpus files, exactly as the passages would be handed to an LLM. All use
  the same embedding model as parrot-parents (all-MiniLM-L6-v2, through
  :class:`SentenceTransformerEmbeddings`), on all corpora at once with no corpus filter.
  They need ``pip install -e ".[bench]"``; nothing here is imported by the package.

Importing this module runs nothing and loads no model: heavy imports sit inside the
functions that need them.
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import os
import platform
import re
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parrot_parents.eval.questions import Question
    from parrot_parents.eval.scorer import RunPassage

__all__ = [
    "CHUNKING_EVAL",
    "REPORTS",
    "REPO_ROOT",
    "SCORES",
    "SCORING",
    "SHARED",
    "Row",
    "bm25_dense_rrf",
    "child",
    "command",
    "cpu_model",
    "cut_on_whitespace",
    "english_texts",
    "eval_argv",
    "langchain_parent_document",
    "llamaindex_auto_merging",
    "machine",
    "replace_section",
    "run_row",
]

# -- paths ---------------------------------------------------------------------------------

#: The repository root (this file resolved, so a link to the package still finds it).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Where the benchmarks write their reports.
REPORTS = REPO_ROOT / "benchmarks" / "reports"
#: The shared benchmark data beside the repository (``../shared/benchmarks``).
SHARED = REPO_ROOT.parent / "shared" / "benchmarks"
#: The dev set: ``questions.csv`` and ``corpora/``.
CHUNKING_EVAL = SHARED / "chunking_eval"

# -- commands ------------------------------------------------------------------------------

_RUN = ("python", "-m", "benchmarks", "run")


#: What a report writes for another checkout's path: the path is the machine's own, so a
#: report names that checkout by its commit (:func:`commit_of`) and shows this instead.
OTHER_CHECKOUT = "<older checkout>"

#: The options whose value is another checkout's path.
_CHECKOUT_OPTIONS = ("--src", "--baseline")

#: What a report writes for any other absolute path given to it (a report or cache file,
#: a data directory): the machine's own, which a reader's is not.
LOCAL_FILE = "<path>"


def command(module: str, argv: Sequence[str] = ()) -> str:
    """The command line that runs the benchmark ``module`` (its ``__name__``) with ``argv``.

    Reports print it, so a reader can run the same thing again from the repository root:
    ``command("benchmarks.latency.scale", ["--rebuild"])`` is
    ``"python -m benchmarks run scale --rebuild"``. The path given to ``--src`` or
    ``--baseline`` is written :data:`OTHER_CHECKOUT`, and any other absolute path
    :data:`LOCAL_FILE`.
    """
    shown: list[str] = []
    for arg in argv:
        option, eq, value = arg.partition("=")
        if shown and shown[-1] in _CHECKOUT_OPTIONS:
            arg = OTHER_CHECKOUT
        elif eq and option in _CHECKOUT_OPTIONS:
            arg = f"{option}={OTHER_CHECKOUT}"
        elif arg.startswith("/"):
            arg = LOCAL_FILE
        elif eq and value.startswith("/"):
            arg = f"{option}={LOCAL_FILE}"
        shown.append(arg)
    kept = (OTHER_CHECKOUT, LOCAL_FILE)
    return " ".join(
        a if a in kept or a.endswith(tuple("=" + k for k in kept)) else shlex.quote(a)
        for a in [*_RUN, module.rsplit(".", 1)[-1], *shown]
    )


def commit_of(checkout: Path | str | None = None) -> str:
    """``commit <hash>`` of a checkout (``git describe --always --dirty``), for a report
    to name the code it measured without its path; this tree's when ``checkout`` is None,
    ``an unknown commit`` outside git."""
    path = Path(checkout) if checkout is not None else REPO_ROOT
    try:
        described = subprocess.run(
            ["git", "-C", str(path), "describe", "--always", "--dirty", "--abbrev=7"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit"
    return f"commit {described}"


def child(
    module: str,
    argv: Sequence[str],
    src: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``(command, environment)`` of a child process that runs the benchmark ``module``.

    The child runs this tree's benchmark code on the product code (``parrot_parents``) of
    the checkout ``src``; ``None`` means this tree's. ``env`` (default: this process's
    environment) is copied and its ``PYTHONPATH`` replaced.

    Both packages sit at the root of their checkout, so the order of ``sys.path`` alone
    cannot take ``benchmarks`` from one and ``parrot_parents`` from the other: the child
    finds this tree's ``benchmarks`` through a link in ``.bench/harness/`` (created here,
    git-ignored), placed before ``src``. ``python -P`` keeps the working directory off
    ``sys.path``, where it would put its own ``parrot_parents`` first.
    """
    out = dict(os.environ if env is None else env)
    if src is None:
        out["PYTHONPATH"] = str(REPO_ROOT)
    else:
        harness = REPO_ROOT / ".bench" / "harness"
        link = harness / "benchmarks"
        if not link.is_symlink():
            harness.mkdir(parents=True, exist_ok=True)
            # Relative, so the link survives a move of the checkout; two processes may race.
            with contextlib.suppress(FileExistsError):
                link.symlink_to(os.path.join("..", "..", "benchmarks"), target_is_directory=True)
        out["PYTHONPATH"] = os.pathsep.join([str(harness), str(Path(src).resolve())])
    name = module.rsplit(".", 1)[-1]
    return [sys.executable, "-P", "-m", "benchmarks", "run", name, *argv], out


# -- documents -----------------------------------------------------------------------------


def replace_section(doc: Path, name: str, body: str, heading: str | None = None) -> None:
    """Put ``body`` between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in ``doc``.

    The markers are written with the body, and the rest of the document is kept. A
    document without them gets them at its end, under ``heading`` (a Markdown heading
    line) when one is given; a missing document is created, starting ``# Benchmarks``.
    """
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    section = f"{start}\n{body}\n{end}"
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    if start in text and end in text:
        text = text[: text.index(start)] + section + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + (f"\n\n{heading}" if heading else "") + "\n\n" + section + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text, encoding="utf-8")


# -- text ---------------------------------------------------------------------------------


def english_texts() -> list[str]:
    """English text found offline on this machine, in a fixed order: the language
    reference's topics (``pydoc_data.topics``, sorted by name), the long descriptions of
    every installed distribution (``*.dist-info/METADATA`` after its header, sorted by
    path), the docstrings of the standard library's modules, classes and functions (files
    sorted by path), then the README, NEWS, FAQ and ``.md``/``.txt``/``.rst`` files of
    ``/usr/share/doc`` (sorted by path, gzip opened, changelogs and copyright files left
    out). One string per source, each starting with a ``# name`` heading."""
    import pydoc_data.topics as topics

    texts = [f"# {name}\n\n{topics.topics[name]}" for name in sorted(topics.topics)]
    site = Path(sysconfig.get_paths()["purelib"])
    for meta in sorted(site.glob("*.dist-info/METADATA")):
        body = meta.read_text(encoding="utf-8", errors="replace").split("\n\n", 1)
        if len(body) == 2 and body[1].strip():
            texts.append(f"# {meta.parent.name}\n\n{body[1]}")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        parts = path.relative_to(stdlib).parts
        if parts[0] in ("site-packages", "test", "idlelib", "lib2to3") or "tests" in parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        docs = [
            doc
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (doc := ast.get_docstring(node))
            and len(doc) >= 40
        ]
        if docs:
            texts.append(f"# {'.'.join(parts)}\n\n" + "\n\n".join(docs))
    for path in sorted(Path("/usr/share/doc").rglob("*")):
        name = path.name.lower()
        if not path.is_file() or "changelog" in name or "copyright" in name:
            continue
        if not re.search(r"readme|\.md|\.txt|\.rst|news|faq", name):
            continue
        try:
            data = path.read_bytes()
            texts.append(
                f"# {path.parent.name}: {path.name}\n\n"
                + (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8")
            )
        except (OSError, UnicodeDecodeError, gzip.BadGzipFile, EOFError):
            continue
    return texts


# -- machine -------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what ``platform`` knows elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine() -> str:
    """One line: cores, CPU model, torch threads, platform."""
    import torch

    return (
        f"{os.cpu_count()} CPU cores (`os.cpu_count()`), {cpu_model()}; "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads; "
        f"Python {platform.python_version()}, {platform.system()} {platform.machine()}"
    )


# -- eval rows -----------------------------------------------------------------------------

# Report every @k and every budget the tables show; ks 1..10 for completeness.
SCORES = ["--ks", "1,3,5,10", "--budgets", "1000,2000,4000,8000"]
# Most rows measure dense search (they predate hybrid search, now the default; see
# hybrid_table). A row that measures the package defaults is scored with SCORES alone.
SCORING = [*SCORES, "--search-mode", "dense"]


@dataclass(frozen=True)
class Row:
    """One configuration: a slug (run file name), a label, and its ``eval`` options."""

    slug: str
    label: str
    options: tuple[str, ...]


def eval_argv(
    row: Row, questions: Path, corpora: Path, runs: Path, scoring: Sequence[str] = SCORING
) -> list[str]:
    """The ``parrot-parents`` arguments of ``row``: its run file is ``runs/<slug>.jsonl``.

    ``scoring`` follows the row's options (default :data:`SCORING`, which searches dense
    only; :data:`SCORES` leaves the search mode to the package default).
    """
    return [
        "eval",
        "--questions",
        str(questions),
        "--corpora",
        str(corpora),
        "--out",
        str(runs / f"{row.slug}.jsonl"),
        *row.options,
        *scoring,
    ]


async def run_row(
    row: Row, questions: Path, corpora: Path, runs: Path, scoring: Sequence[str] = SCORING
) -> Any:
    """Parse the row's command with the CLI parser and run it with the CLI's code
    (``scoring`` as in :func:`eval_argv`).

    Returns the CLI's ``EvalResult`` (its ``to_dict()`` is what the tables read).
    """
    from parrot_parents.cli import eval as cli_eval
    from parrot_parents.cli.main import build_parser

    args = build_parser().parse_args(eval_argv(row, questions, corpora, runs, scoring))
    return await cli_eval.evaluate(args)


# -- spans ---------------------------------------------------------------------------------


def cut_on_whitespace(text: str, size: int, offset: int = 0) -> list[tuple[int, int]]:
    """Consecutive ``(start, end)`` spans of at most ~``size`` characters covering ``text``.

    Each cut falls on the last whitespace before the limit (a hard cut when there is none).
    Offsets are shifted by ``offset``.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = max(text.rfind(" ", start + 1, end), text.rfind("\n", start + 1, end))
            end = cut if cut > start else end
        spans.append((start + offset, end + offset))
        start = end
    return spans


# -- peers -------------------------------------------------------------------------------

Run = dict[int, list["RunPassage"]]
Log = Callable[[str], None]


def _span(corpus: str, start: int | None, text: str) -> tuple[int, int, bool]:
    """``(start, end, exact)``: the passage's span; ``exact`` when the text is that slice."""
    if start is None or start < 0:
        start = corpus.find(text)
    end = start + len(text)
    return start, end, corpus[start:end] == text


def _plain_chunks(corpora: Mapping[str, str], size: int) -> list[tuple[str, int, str]]:
    """``(corpus_id, start, text)`` of plain chunks of at most ``size`` characters."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=0, add_start_index=True
    )
    out = []
    for cid, text in corpora.items():
        for doc in splitter.create_documents([text]):
            out.append((cid, int(doc.metadata["start_index"]), doc.page_content))
    return out


def bm25_dense_rrf(
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    embedding: Any,
    *,
    chunk_size: int = 400,
    depth: int = 100,
    top: int = 40,
    rrf_k: int = 60,
    log: Log = print,
) -> tuple[Run, Run]:
    """``(fused run, dense-only run)`` over the same plain chunks.

    Plain ``chunk_size``-character chunks (LangChain's ``RecursiveCharacterTextSplitter``, no
    overlap), BM25 (``bm25s``, English stopwords) and dense cosine search, each top
    ``depth``, fused by Reciprocal Rank Fusion with ``rrf_k`` (Cormack, Clarke and Büttcher,
    SIGIR 2009); the top ``top`` are handed over.
    """
    import bm25s
    import numpy as np

    chunks = _plain_chunks(corpora, chunk_size)
    texts = [t for _, _, t in chunks]
    log(f"bm25+dense: {len(chunks)} chunks of at most {chunk_size} characters")
    vectors = np.asarray(embedding.embed_documents(texts), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bm25 = bm25s.BM25()
    bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    fused: Run = {}
    dense_only: Run = {}
    for q in questions:
        qv = np.asarray(embedding.embed_query(q.question), dtype=np.float32)
        qv /= np.linalg.norm(qv)
        dense = list(np.argsort(-(vectors @ qv))[:depth])
        ids, _ = bm25.retrieve(
            bm25s.tokenize([q.question], stopwords="en", show_progress=False),
            k=min(depth, len(texts)),
            show_progress=False,
        )
        lexical = [int(i) for i in ids[0]]
        scores: dict[int, float] = {}
        for ranking in (dense, lexical):
            for rank, i in enumerate(ranking, 1):
                scores[int(i)] = scores.get(int(i), 0.0) + 1.0 / (rrf_k + rank)
        best = sorted(scores, key=lambda i: (-scores[i], i))[:top]

        def spans(order: Sequence[int]) -> list[RunPassage]:
            return [(chunks[i][0], chunks[i][1], chunks[i][1] + len(chunks[i][2])) for i in order]

        fused[q.qid] = spans(best)
        dense_only[q.qid] = spans([int(i) for i in dense[:top]])
    return fused, dense_only


def _lc_embeddings(embedding: Any) -> Any:
    from langchain_core.embeddings import Embeddings

    class Adapter(Embeddings):
        """LangChain's Embeddings interface around the package's model."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedding.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return embedding.embed_query(text)

    return Adapter()


def langchain_parent_document(
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    embedding: Any,
    *,
    child_size: int = 400,
    parent_size: int = 2000,
    k: int = 10,
    log: Log = print,
) -> tuple[Run, int]:
    """``(run, passages whose text is not their corpus slice)``.

    LangChain's ``ParentDocumentRetriever`` with ``child_size``-character children and
    ``parent_size``-character parents (``RecursiveCharacterTextSplitter``), an
    ``InMemoryVectorStore`` and ``InMemoryStore``, ``k`` children.
    """
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_core.documents import Document
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    retriever = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(_lc_embeddings(embedding)),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=child_size, chunk_overlap=0),
        parent_splitter=RecursiveCharacterTextSplitter(
            chunk_size=parent_size, chunk_overlap=0, add_start_index=True
        ),
        search_kwargs={"k": k},
    )
    retriever.add_documents(
        [Document(page_content=t, metadata={"corpus_id": cid}) for cid, t in corpora.items()]
    )
    log(f"langchain: parents {child_size}/{parent_size} characters, k={k}")
    run: Run = {}
    mismatches = 0
    for q in questions:
        out = []
        for doc in retriever.invoke(q.question):
            cid = doc.metadata["corpus_id"]
            start, end, exact = _span(
                corpora[cid], doc.metadata.get("start_index"), doc.page_content
            )
            mismatches += not exact
            out.append((cid, start, end))
        run[q.qid] = out
    return run, mismatches


def llamaindex_auto_merging(
    questions: Sequence[Question],
    corpora: Mapping[str, str],
    embedding: Any,
    *,
    chunk_sizes: Sequence[int] = (2048, 512, 128),
    top_k: int = 12,
    log: Log = print,
) -> tuple[Run, int]:
    """``(run, passages whose text is not their corpus slice)``.

    LlamaIndex's ``AutoMergingRetriever`` over a ``HierarchicalNodeParser`` of
    ``chunk_sizes`` tokens, leaves in a ``VectorStoreIndex``, ``similarity_top_k=top_k``.
    Tokens are counted with the embedding model's tokenizer: LlamaIndex's default
    (tiktoken) downloads its vocabulary, and the benchmarks run offline.
    """
    from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes
    from llama_index.core.retrievers import AutoMergingRetriever
    from pydantic import PrivateAttr

    class Adapter(BaseEmbedding):
        """LlamaIndex's embedding interface around the package's model."""

        _inner: Any = PrivateAttr()

        def __init__(self, inner: Any) -> None:
            super().__init__(model_name="all-MiniLM-L6-v2", embed_batch_size=64)
            self._inner = inner

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._inner.embed_query(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._inner.embed_query(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._inner.embed_documents([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._inner.embed_documents(texts)

    tokenizer = embedding.model.tokenizer
    Settings.tokenizer = lambda text: tokenizer.encode(text, add_special_tokens=False)
    parser = HierarchicalNodeParser.from_defaults(chunk_sizes=list(chunk_sizes))
    docs = [Document(text=t, metadata={"corpus_id": cid}) for cid, t in corpora.items()]
    nodes = parser.get_nodes_from_documents(docs)
    leaves = get_leaf_nodes(nodes)
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    index = VectorStoreIndex(leaves, storage_context=storage, embed_model=Adapter(embedding))
    retriever = AutoMergingRetriever(
        index.as_retriever(similarity_top_k=top_k), storage, verbose=False
    )
    log(f"llamaindex: {len(nodes)} nodes, {len(leaves)} leaves, top {top_k}")
    # A node's start_char_idx counts from the start of its parent node's text (the
    # hierarchy is cut level by level); add the parents' offsets up to the document.
    by_id = {n.node_id: n for n in nodes}
    absolute: dict[str, int] = {}

    def offset(node: Any) -> int:
        if node.node_id not in absolute:
            parent = node.parent_node
            base = offset(by_id[parent.node_id]) if parent is not None else 0
            absolute[node.node_id] = base + int(node.start_char_idx or 0)
        return absolute[node.node_id]

    run: Run = {}
    mismatches = 0
    for q in questions:
        out = []
        for hit in retriever.retrieve(q.question):
            node = by_id.get(hit.node.node_id, hit.node)
            cid = node.metadata["corpus_id"]
            start, end, exact = _span(corpora[cid], offset(node), node.get_content())
            mismatches += not exact
            out.append((cid, start, end))
        run[q.qid] = out
    return run, mismatches
