"""Late chunking with the real bundled all-MiniLM-L6-v2 model (no mocks, offline)."""

from __future__ import annotations

import asyncio
import copy
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from parrot_parents.embeddings.late_chunking import (
    LateChunkingEmbedder,
    _window_bounds,
    check_late_chunking_model,
    span_token_indices,
)
from parrot_parents.embeddings.sentence_transformer import (
    SentenceTransformerEmbeddings,
    default_model_path,
)
from parrot_parents.errors import ModelLoadError

MULTIBYTE = "café naïve 日本語 emoji 🎉 done"

PARAGRAPH = (
    "The lighthouse on Karrek Island was built in 1874 by the harbour board. "
    "It stood on a granite ledge at the northern tip, where ships rounding the cape "
    "met the strongest currents of the bay. Its lamp burned paraffin until 1931, when "
    "engineers replaced it with an electric lantern fed by a diesel generator. "
    "Keepers lived there in shifts of six weeks, rowing supplies across from the village. "
    "After automation in 1988 the keepers left, and the cottage became a small museum "
    "about the wrecks along the coast."
)


class _Wrap:
    """Anything with a ``.model`` is accepted as ``embeddings``."""

    def __init__(self, model: object) -> None:
        self.model = model


def _cos(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def _word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\S+", text)]


def _whitespace_chunks(text: str, size: int) -> list[tuple[int, int]]:
    """Consecutive spans of about ``size`` characters, cut on whitespace, covering the text."""
    spans, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(" ", start + 1, end)
            end = cut if cut > start else end
        spans.append((start, end))
        start = end
    return spans


@pytest.fixture(scope="module")
def embeddings() -> SentenceTransformerEmbeddings:
    emb = SentenceTransformerEmbeddings()
    emb.warm_up()
    return emb


@pytest.fixture(scope="module")
def embedder(embeddings: SentenceTransformerEmbeddings) -> LateChunkingEmbedder:
    late = LateChunkingEmbedder(embeddings)
    late.warm_up()
    return late


@pytest.fixture(scope="module")
def char_tokenizer():
    """A character-level WordPiece tokenizer over MiniLM's own ids, built offline."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    lines = (default_model_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab = {tok: i for i, tok in enumerate(lines)}
    specials = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")
    small = {
        t: i
        for t, i in vocab.items()
        if len(t) == 1 or (t.startswith("##") and len(t) == 3) or t in specials
    }
    tok = Tokenizer(models.WordPiece(small, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        model_max_length=256,
    )


# -- span -> token mapping --------------------------------------------------------------------


def test_span_token_indices_multibyte_with_real_offsets(embeddings) -> None:
    tokenizer = embeddings.model[0].tokenizer
    enc = tokenizer(MULTIBYTE, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"])
    words = {MULTIBYTE[s:e]: (s, e) for s, e in _word_spans(MULTIBYTE)}
    groups = dict(zip(words, span_token_indices(offsets, list(words.values())), strict=True))

    assert [tokens[i] for i in groups["café"]] == ["cafe"]
    assert [tokens[i] for i in groups["naïve"]] == ["naive"]
    assert [tokens[i] for i in groups["日本語"]] == ["日", "本", "語"]
    assert [tokens[i] for i in groups["🎉"]] == ["[UNK]"]
    # Offsets are str indices: the emoji is one character, "done" follows it.
    assert offsets[groups["done"][0]] == (MULTIBYTE.index("done"), len(MULTIBYTE))
    # Special tokens, offsets (0, 0), never belong to a span, even one starting at 0.
    whole = span_token_indices(offsets, [(0, len(MULTIBYTE))])[0]
    assert whole == list(range(1, len(tokens) - 1))


def test_span_token_indices_partial_gap_and_nearest() -> None:
    # "ab cd  ef": tokens ab, c, ##d, ef; a (0, 0) special first.
    offsets = [(0, 0), (0, 2), (3, 4), (4, 5), (7, 9)]
    assert span_token_indices(offsets, [(1, 4)]) == [[1, 2]]  # partial overlap counts
    assert span_token_indices(offsets, [(3, 3)]) == [[2]]  # empty, touching "c" only
    assert span_token_indices(offsets, [(4, 4)]) == [[2, 3]]  # empty between two tokens: tie
    assert span_token_indices(offsets, [(5, 6)]) == [[3]]  # gap: nearest on the left
    assert span_token_indices(offsets, [(6, 7)]) == [[4]]  # gap: nearest on the right
    assert span_token_indices(offsets, [(5, 7)]) == [[3, 4]]  # equidistant: both
    assert span_token_indices(offsets, [(5, 7)], nearest=False) == [[]]
    assert span_token_indices(offsets, [(8, 8)]) == [[4]]  # empty inside a token
    assert span_token_indices([(0, 0), (0, 0)], [(0, 0)]) == [[]]  # nothing usable


def test_span_token_indices_unsorted_offsets_match_sorted() -> None:
    offsets = [(0, 2), (3, 4), (4, 5), (7, 9)]
    spans = [(0, 9), (1, 4), (3, 3), (5, 6), (5, 7), (8, 8), (9, 9)]
    order = [3, 0, 2, 1]
    shuffled = [offsets[i] for i in order]
    expected = span_token_indices(offsets, spans)
    got = span_token_indices(shuffled, spans)
    assert [sorted(order[i] for i in g) for g in got] == expected


def test_same_char_spans_under_two_tokenizers(embeddings, char_tokenizer) -> None:
    text = "Late chunking keeps context: café naïve 日本語 🎉 done."
    spans = _word_spans(text)
    base_tok = embeddings.model[0].tokenizer
    counts = []
    for tokenizer in (base_tok, char_tokenizer):
        offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
        groups = span_token_indices(offsets, spans)
        counts.append(sum(len(g) for g in groups))
        for (start, end), group in zip(spans, groups, strict=True):
            assert group, (start, end)
            # The tokens chosen cover exactly the span's characters, whatever the tokenizer.
            assert min(offsets[i][0] for i in group) == start
            assert max(offsets[i][1] for i in group) == end
    assert counts[0] < counts[1]  # genuinely different tokenizations

    # Run the model with each tokenizer: one vector per char span either way.
    first = copy.copy(embeddings.model[0])  # shares the weights, not the tokenizer
    first.processor = char_tokenizer
    from sentence_transformers import SentenceTransformer

    char_model = SentenceTransformer(modules=[first, *list(embeddings.model)[1:]], device="cpu")
    char_late = LateChunkingEmbedder(_Wrap(char_model))
    word_late = LateChunkingEmbedder(embeddings)
    for late in (word_late, char_late):
        vectors = late.embed_spans([(text, spans)])[0]
        assert len(vectors) == len(spans)
        assert all(math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-4) for v in vectors)
    assert embeddings.model[0].tokenizer is base_tok  # the shared model was not touched


# -- one vector per span ----------------------------------------------------------------------


def test_one_vector_per_span_including_degenerate_spans(embedder) -> None:
    ws = MULTIBYTE.index(" ")
    items = [
        (MULTIBYTE, [(0, 4), (ws, ws + 1), (ws, ws), (0, 0), (len(MULTIBYTE), len(MULTIBYTE))]),
        ("", [(0, 0)]),
        ("   \n\t ", [(0, 3), (2, 2)]),
        ("no spans here", []),
        (PARAGRAPH, [(0, len(PARAGRAPH))]),
    ]
    out = embedder.embed_spans(items)
    assert [len(v) for v in out] == [5, 1, 2, 0, 1]
    for vectors in out:
        for vector in vectors:
            assert len(vector) == 384
            assert all(math.isfinite(x) for x in vector)
            assert math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-4)
    assert embedder.embed_spans([]) == []


def test_whitespace_span_uses_nearest_token(embedder) -> None:
    text = "alpha beta"
    gap, alpha, beta, both = embedder.embed_spans([(text, [(5, 6), (0, 5), (6, 10), (0, 10)])])[0]
    # Equidistant from "alpha" and "beta": the mean of both, i.e. the whole text.
    assert _cos(gap, both) > 0.999
    assert _cos(gap, alpha) < 0.999 and _cos(gap, beta) < 0.999


def test_empty_text_equals_encode(embedder, embeddings) -> None:
    vector = embedder.embed_spans([("", [(0, 0)])])[0][0]
    assert _cos(vector, embeddings.embed_query("")) > 0.999


def test_invalid_spans_raise_value_error_naming_the_span(embedder) -> None:
    with pytest.raises(ValueError, match=r"span 1 \(3, 99\).*out of range.*5 characters"):
        embedder.embed_spans([("hello", [(0, 1), (3, 99)])])
    with pytest.raises(ValueError, match=r"item 1: span 0 \(4, 2\) has start > end"):
        embedder.embed_spans([("hello", []), ("hello", [(4, 2)])])
    with pytest.raises(ValueError, match=r"\(-1, 2\)"):
        embedder.embed_spans([("hello", [(-1, 2)])])


# -- context and windows ----------------------------------------------------------------------


def test_whole_text_span_matches_encode(embedder, embeddings) -> None:
    vector = embedder.embed_spans([(PARAGRAPH, [(0, len(PARAGRAPH))])])[0][0]
    assert _cos(vector, embeddings.embed_query(PARAGRAPH)) > 0.99


def test_late_vector_differs_from_independent_child(embedder, embeddings) -> None:
    spans = _whitespace_chunks(PARAGRAPH, 120)
    late = embedder.embed_spans([(PARAGRAPH, spans)])[0]
    alone = embeddings.embed_documents([PARAGRAPH[s:e] for s, e in spans])
    for a, b in zip(late, alone, strict=True):
        assert 0.3 < _cos(a, b) < 0.98  # related, yet coloured by the rest of the parent


def test_window_bounds_cover_every_token() -> None:
    assert _window_bounds(0, 254, 64) == [(0, 0)]
    assert _window_bounds(254, 254, 64) == [(0, 254)]
    bounds = _window_bounds(3000, 254, 64)
    assert bounds[0][0] == 0 and bounds[-1][1] == 3000
    assert all(hi - lo == 254 for lo, hi in bounds)
    for (_, prev_hi), (lo, _) in itertools.pairwise(bounds):
        assert prev_hi - lo >= 64  # consecutive windows overlap by at least the overlap


def test_long_text_gets_windows_and_tail_vectors(embedder) -> None:
    words = PARAGRAPH.split()
    # Vary the words so that windows see different contexts; ~3000 tokens, 256-token windows.
    text = " ".join(f"{w} section{i // 40}" for i, w in enumerate(words * 19))
    tokenizer = embedder.embeddings.model[0].tokenizer
    n_tokens = len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    assert n_tokens > 2500

    spans = _whitespace_chunks(text, 400)
    tail = (len(text) - 5, len(text))
    before_tokens, before_positions = embedder.tokens_processed, embedder.positions_encoded
    out = embedder.embed_spans([(text, [*spans, tail]), (PARAGRAPH, [(0, 20)])])
    assert len(out[0]) == len(spans) + 1 and len(out[1]) == 1
    assert all(math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-4) for v in out[0])
    # Each token counted once; the model saw more positions (overlap + special tokens).
    paragraph_tokens = len(tokenizer(PARAGRAPH, add_special_tokens=False)["input_ids"])
    assert embedder.tokens_processed - before_tokens == n_tokens + paragraph_tokens
    encoded = embedder.positions_encoded - before_positions
    assert n_tokens + paragraph_tokens < encoded < 1.5 * (n_tokens + paragraph_tokens)
    # The last ~5 characters get their own vector, close to the last chunk's.
    assert _cos(out[0][-1], out[0][-2]) > 0.3


def test_windowed_path_close_to_single_pass_when_text_fits(embeddings, embedder) -> None:
    spans = _whitespace_chunks(PARAGRAPH, 150)
    single = embedder.embed_spans([(PARAGRAPH, spans)])[0]
    # A window bigger than the text: identical to the single pass.
    roomy = LateChunkingEmbedder(embeddings, max_window_tokens=200)
    for a, b in zip(single, roomy.embed_spans([(PARAGRAPH, spans)])[0], strict=True):
        assert _cos(a, b) > 0.9999
    # Forced small windows (48 tokens, 16 overlap): several windows, still close.
    small = LateChunkingEmbedder(embeddings, max_window_tokens=48, window_overlap_tokens=16)
    windowed = small.embed_spans([(PARAGRAPH, spans)])[0]
    assert small.positions_encoded > small.tokens_processed + 4
    assert len(windowed) == len(spans)
    for a, b in zip(single, windowed, strict=True):
        assert _cos(a, b) > 0.6


def test_window_settings_are_validated(embeddings) -> None:
    with pytest.raises(ValueError, match="exceeds the model's limit of 256"):
        LateChunkingEmbedder(embeddings, max_window_tokens=1000).warm_up()
    with pytest.raises(ValueError, match="window_overlap_tokens=64"):
        LateChunkingEmbedder(embeddings, max_window_tokens=60).warm_up()
    with pytest.raises(ValueError):
        LateChunkingEmbedder(embeddings, batch_size=0)
    with pytest.raises(ValueError):
        LateChunkingEmbedder(embeddings, window_overlap_tokens=-1)


def test_batching_does_not_change_vectors(embeddings, embedder) -> None:
    items = [(PARAGRAPH, _whitespace_chunks(PARAGRAPH, 100)), (MULTIBYTE, [(0, 4)])]
    one_by_one = LateChunkingEmbedder(embeddings, batch_size=1).embed_spans(items)
    batched = embedder.embed_spans(items)
    for a_item, b_item in zip(one_by_one, batched, strict=True):
        for a, b in zip(a_item, b_item, strict=True):
            assert _cos(a, b) > 0.9999


def test_aembed_spans_matches_embed_spans(embedder) -> None:
    items = [(PARAGRAPH, [(0, 50), (50, 120)])]
    got = asyncio.run(embedder.aembed_spans(items))
    want = embedder.embed_spans(items)
    assert np.allclose(np.asarray(got), np.asarray(want), atol=1e-6)


# -- unsupported models -----------------------------------------------------------------------


def test_plain_object_is_rejected() -> None:
    with pytest.raises(ModelLoadError, match="needs a sentence-transformers model, got object"):
        check_late_chunking_model(object())
    with pytest.raises(ModelLoadError):
        LateChunkingEmbedder(_Wrap(object())).warm_up()
    with pytest.raises(ModelLoadError, match="no 'model'"):
        LateChunkingEmbedder(object()).warm_up()  # type: ignore[arg-type]


def test_model_without_pooling_is_rejected(embeddings) -> None:
    from sentence_transformers import SentenceTransformer

    bare = SentenceTransformer(modules=[embeddings.model[0]], device="cpu")
    with pytest.raises(ModelLoadError, match=r"found Transformer \("):
        check_late_chunking_model(bare)
    with pytest.raises(ModelLoadError, match="found Transformer"):
        LateChunkingEmbedder(_Wrap(bare)).warm_up()


def test_cls_pooling_is_rejected(embeddings) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling

    cls_model = SentenceTransformer(
        modules=[embeddings.model[0], Pooling(384, pooling_mode="cls")], device="cpu"
    )
    with pytest.raises(ModelLoadError, match="pooling mode cls"):
        check_late_chunking_model(cls_model)


def test_default_model_is_supported(embeddings) -> None:
    check_late_chunking_model(embeddings.model)
    assert Path(default_model_path()).is_dir()
