"""Tests of parrot_parents.rerankers with a real tiny cross-encoder built on disk (no mocks)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError, ModelLoadError
from parrot_parents.rerankers import AbstractReranker, CrossEncoderReranker, RerankedDocument
from parrot_parents.rerankers import cross_encoder as ce_module
from parrot_parents.rerankers.testing import build_tiny_cross_encoder

QUERY = "what do parrots eat"
TEXTS = [
    "Parrots eat seeds, nuts, fruit and buds; some also eat insects.",
    "The stock market closed lower on Tuesday after a volatile session.",
    "A parrot's diet in captivity should include fresh vegetables.",
    "",
    "PostgreSQL stores vectors with the pgvector extension. " * 80,  # > 512 tokens: truncated
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"), seed=0)


@pytest.fixture(scope="module")
def two_label_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce-2"), num_labels=2)


@pytest.fixture
def docs() -> list[Document]:
    return [Document(page_content=t, metadata={"i": i}) for i, t in enumerate(TEXTS)]


@pytest.fixture
def isolated(tiny_model: Path) -> Iterator[CrossEncoderReranker]:
    """A reranker whose cached model no other test shares (hooks are attached to it)."""
    reranker = CrossEncoderReranker(str(tiny_model), max_length=500, batch_size=2)
    yield reranker
    reranker.close()
    ce_module.clear_model_cache()


def test_init_default() -> None:
    reranker = CrossEncoderReranker()
    assert reranker.model_name == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    assert (reranker.batch_size, reranker.max_length, reranker.device) == (32, 512, "cpu")
    assert reranker._model is None  # lazy: nothing loaded, nothing looked up
    assert not any(key[0] == reranker.model_name for key in ce_module._CACHE)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 0}, r"batch_size must be >= 1, got 0"),
        ({"batch_size": -3}, r"batch_size must be >= 1, got -3"),
        ({"batch_size": True}, r"batch_size must be an int >= 1, got True"),
        ({"batch_size": 8.0}, r"batch_size must be an int >= 1, got 8\.0"),
        ({"max_length": 2}, r"max_length must be >= 4, got 2"),
        ({"max_length": "512"}, r"max_length must be an int >= 4, got '512'"),
        ({"device": ""}, r"device must be a non-empty string, got ''"),
        ({"device": "gpu"}, r"device must be a torch device string .* got 'gpu'"),
        ({"model": ""}, r"model must be a non-empty model name or directory, got ''"),
        ({"model": 3}, r"model must be a non-empty model name or directory, got 3"),
    ],
)
def test_bad_params(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as info:
        CrossEncoderReranker(**kwargs)
    assert isinstance(info.value, ValueError)


async def test_rerank_sorted_by_raw_score(tiny_model: Path, docs: list[Document]) -> None:
    reranker = CrossEncoderReranker(str(tiny_model))
    result = await reranker.rerank(QUERY, docs)

    assert all(isinstance(r, RerankedDocument) for r in result)
    assert [r.rank for r in result] == list(range(len(docs)))
    assert sorted(r.original_rank for r in result) == list(range(len(docs)))
    for r in result:
        assert r.document is docs[r.original_rank]
        assert r.model == str(tiny_model)
    scores = [r.score for r in result]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores)  # the tiny model separates these passages
    # Raw logits, not sigmoid probabilities: the tiny model gives negative ones here.
    assert min(scores) < 0
    # Same scores in input order as score().
    by_input = await reranker.score(QUERY, docs)
    assert [by_input[r.original_rank] for r in result] == scores


async def test_scores_equal_transformers_logits(tiny_model: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_model)).eval()
    expected = []
    for text in TEXTS:
        # Batched (list) form: a bare "" text_pair would be dropped, a listed one is kept.
        features = tokenizer(
            [QUERY], [text], truncation="longest_first", max_length=512, return_tensors="pt"
        )
        with torch.inference_mode():
            expected.append(float(model(**features).logits[0, 0]))

    reranker = CrossEncoderReranker(str(tiny_model), batch_size=3)  # padded, mixed batches
    got = await reranker.score(QUERY, [Document(page_content=t) for t in TEXTS])
    assert got == pytest.approx(expected, abs=1e-5)


async def test_top_n(tiny_model: Path, docs: list[Document]) -> None:
    reranker = CrossEncoderReranker(str(tiny_model))
    full = await reranker.rerank(QUERY, docs)
    assert await reranker.rerank(QUERY, docs, top_n=2) == full[:2]
    assert await reranker.rerank(QUERY, docs, top_n=1) == full[:1]
    assert await reranker.rerank(QUERY, docs, top_n=99) == full
    for bad in (0, -1):
        with pytest.raises(ValueError, match=rf"top_n must be >= 1 or None, got {bad}"):
            await reranker.rerank(QUERY, docs, top_n=bad)


async def test_empty_documents_do_not_load(tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(str(tmp_path / "absent"))
    assert await reranker.rerank(QUERY, []) == []
    assert reranker._model is None


def test_one_model_per_process(tiny_model: Path) -> None:
    first = CrossEncoderReranker(str(tiny_model))
    second = CrossEncoderReranker(tiny_model, batch_size=4)  # PathLike, other batch size
    assert first.model is second.model
    second.close()
    assert second._model is None
    assert second.model is first.model  # reloaded from the process cache
    other = CrossEncoderReranker(str(tiny_model), max_length=128)
    assert other.model is not first.model  # max_length is part of the key


def test_two_labels_rejected(two_label_model: Path) -> None:
    reranker = CrossEncoderReranker(str(two_label_model))
    with pytest.raises(ModelLoadError, match=r"has 2 output labels.*num_labels=1"):
        reranker.warm_up()


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelLoadError) as info:
        CrossEncoderReranker(str(missing)).warm_up()
    assert str(missing) in str(info.value)
    assert "does not exist" in str(info.value)


def test_missing_hub_model_names_cache() -> None:
    from huggingface_hub import constants

    name = "parrot-parents-tests/no-such-reranker"
    with pytest.raises(ModelLoadError) as info:
        CrossEncoderReranker(name).warm_up()
    message = str(info.value)
    cache = os.getenv("SENTENCE_TRANSFORMERS_HOME") or str(constants.HF_HUB_CACHE)
    assert repr(name) in message
    assert repr(cache) in message
    assert repr(str(Path(name).absolute())) in message  # the local path it checked


def test_dict_round_trip(tiny_model: Path) -> None:
    reranker = CrossEncoderReranker(str(tiny_model), batch_size=7, max_length=256, device="cpu")
    data = reranker.to_dict()
    assert data == {
        "type": "cross_encoder",
        "model": str(tiny_model),
        "batch_size": 7,
        "max_length": 256,
        "device": "cpu",
    }
    data = json.loads(json.dumps(data))
    for rebuilt in (AbstractReranker.from_dict(data), CrossEncoderReranker.from_dict(data)):
        assert isinstance(rebuilt, CrossEncoderReranker)
        assert rebuilt.to_dict() == reranker.to_dict()
    with pytest.raises(ConfigurationError, match=r"unknown reranker type 'nope'"):
        AbstractReranker.from_dict({"type": "nope"})
    with pytest.raises(ConfigurationError, match=r"invalid CrossEncoderReranker config"):
        AbstractReranker.from_dict({**data, "colour": "red"})
    with pytest.raises(ConfigurationError, match=r"batch_size must be >= 1"):
        AbstractReranker.from_dict({**data, "batch_size": 0})


async def test_rerank_runs_off_event_loop(isolated: CrossEncoderReranker) -> None:
    isolated.warm_up()
    threads: list[int] = []
    # CrossEncoder calls the HF model's .forward() directly, so hook a submodule instead.
    handle = isolated.model.model.classifier.register_forward_pre_hook(
        lambda module, args: threads.append(threading.get_ident())
    )
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    many = [Document(page_content=TEXTS[i % len(TEXTS)]) for i in range(40)]
    try:
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        await isolated.rerank(QUERY, many)
        during = ticks - before
        stop.set()
        await task
    finally:
        handle.remove()
    assert len(threads) == 20  # 40 pairs / batch_size 2
    assert threading.get_ident() not in threads  # forward passes ran in a worker thread
    assert during > 20  # the loop kept running other tasks meanwhile


async def test_predict_errors_propagate(
    isolated: CrossEncoderReranker, docs: list[Document]
) -> None:
    def boom(module: torch.nn.Module, args: object) -> None:
        raise RuntimeError("model exploded")

    handle = isolated.model.model.classifier.register_forward_pre_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="model exploded"):
            await isolated.rerank(QUERY, docs)
    finally:
        handle.remove()


async def test_nan_scores_returned(isolated: CrossEncoderReranker, docs: list[Document]) -> None:
    classifier = isolated.model.model.classifier
    handle = classifier.register_forward_hook(
        lambda module, args, output: torch.full_like(output, math.nan)
    )
    try:
        result = await isolated.rerank(QUERY, docs)
    finally:
        handle.remove()
    assert all(math.isnan(r.score) for r in result)
    assert [r.original_rank for r in result] == list(range(len(docs)))


class _FixedScores(AbstractReranker):
    """Minimal concrete reranker returning preset scores, to test the shared ordering."""

    type_name: ClassVar[str] = "fixed"

    def __init__(self, scores: Sequence[float]) -> None:
        self.scores = list(scores)

    @property
    def model_name(self) -> str:
        return "fixed"

    async def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        return self.scores[: len(documents)]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "scores": self.scores}


async def test_order_ties_and_nan() -> None:
    reranker = _FixedScores([1.0, 3.0, math.nan, 3.0, -2.0])
    docs = [Document(page_content=str(i)) for i in range(5)]
    result = await reranker.rerank("q", docs)
    assert [r.original_rank for r in result] == [1, 3, 0, 4, 2]  # ties stable, NaN last
    assert math.isnan(result[-1].score)
    assert [r.original_rank for r in await reranker.rerank("q", docs, top_n=3)] == [1, 3, 0]
    with pytest.raises(ConfigurationError, match=r"has type 'cross_encoder'"):
        _FixedScores.from_dict({"type": "cross_encoder", "scores": []})
