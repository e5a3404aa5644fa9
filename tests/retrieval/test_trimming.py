"""Sentence trimming in the packer: its invariants, on hits with stored sentence vectors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.errors import ConfigurationError, SchemaMismatchError
from parrot_parents.retrieval.packing import pack
from parrot_parents.retrieval.passages import Hit, Passage
from parrot_parents.retrieval.trimming import Candidate, choose_sentences
from parrot_parents.stores.records.sentences import SENTENCES, SentenceVectors, sentence_spans
from parrot_parents.stores.results import SearchResult

DIM = 8
WORDS = ["alpha", "beta", "gamma", "delta", "pay", "day", "fund", "rule"]


def _source(seed: int, n_children: int) -> tuple[str, list[tuple[int, int]]]:
    """A text of ``n_children`` paragraphs of sentences; the paragraphs' spans."""
    rng = np.random.default_rng(seed)
    parts, spans, pos = [], [], 0
    for _ in range(n_children):
        sentences = []
        for _ in range(int(rng.integers(1, 5))):
            words = rng.choice(WORDS, size=int(rng.integers(1, 9)))
            sentences.append(" ".join(words).capitalize() + rng.choice([".", "?", "!"]))
        para = " ".join(sentences)
        parts.append(para)
        spans.append((pos, pos + len(para)))
        pos += len(para) + 2
    return "\n\n".join(parts), spans


def _hits(seed: int, n_children: int) -> tuple[str, list[Hit], np.ndarray]:
    text, spans = _source(seed, n_children)
    rng = np.random.default_rng(seed + 1)
    hits = []
    order = rng.permutation(len(spans))
    for rank, i in enumerate(order):
        s, e = spans[i]
        sents = sentence_spans(text, s, e)
        stored = SentenceVectors.build(sents, rng.normal(size=(len(sents), DIM))).encode()
        # Through SearchResult, as the store hands rows over: the key leaves the metadata.
        result = SearchResult(
            f"c{i}",
            text[s:e],
            {"document_id": "d", "start_index": s, "end_index": e, SENTENCES: stored},
            score=0.9 - rank / 100,
        )
        hits.append(Hit.from_result(result, rank))
    query = rng.normal(size=DIM).astype(np.float32)
    return text, hits, query / np.linalg.norm(query)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 12),
    budget=st.integers(1, 1500),
)
def test_trimmed_packing_keeps_its_invariants(seed: int, n: int, budget: int) -> None:
    text, hits, query = _hits(seed, n)
    passages = [Passage.from_hit(h) for h in hits]
    result = pack(passages, hits, budget, trim=True, query=query)
    # Never over the budget; every passage an exact slice of the source.
    assert sum(len(p.text) for p in result.passages) == result.used <= budget
    for p in result.passages:
        assert p.start_index is not None and p.end_index is not None
        assert text[p.start_index : p.end_index] == p.text
        assert SENTENCES not in p.metadata
    # Every hit is in a passage or cut.
    held = {c for p in result.passages for c in p.child_ids}
    for h in hits:
        assert h.id in held or h.id in result.cut
    if result.trim != "sentences":
        return
    # Trimmed passages start and end on sentence boundaries of their hit.
    by_id = {h.id: h for h in hits}
    for p in result.passages:
        (hit_id,) = p.child_ids
        hit = by_id[hit_id]
        assert hit.sentences is not None
        starts = {s for s, _ in hit.sentences.spans} | {hit.start_index}
        ends = {e for _, e in hit.sentences.spans} | {hit.end_index}
        assert p.start_index in starts and p.end_index in ends
    # What was dropped is reported, and is exactly the rest of the hit's sentences.
    for t in result.trimmed:
        hit = by_id[t["id"]]
        assert hit.sentences is not None
        kept = [tuple(k) for k in t["kept"]]
        dropped = [tuple(d) for d in t["dropped"]]
        assert t["dropped_chars"] == sum(e - s for s, e in dropped) > 0
        for s, e in hit.sentences.spans:
            inside = any(ks <= s and e <= ke for ks, ke in kept)
            assert inside != ((s, e) in dropped)


def test_whole_children_first_then_the_sentences_closest_to_the_question() -> None:
    text = "Aaaa aaaa. Bbbb bbbb.\n\nCccc cccc. Dddd dddd. Eeee eeee."
    first = Candidate((0, 21), [(0, 10), (11, 21)], np.array([0.1, 0.1]))
    second = Candidate((23, 56), [(23, 33), (34, 44), (45, 56)], np.array([0.2, 0.9, 0.3]))
    # The first child whole (21 characters, within 60 % of 36), then the second's best
    # sentence (10); its others would cost 11 and, joined to it, 11 more: over 36.
    first_choice, second_choice = choose_sentences([first, second], 36, whole_share=0.6)
    assert first_choice.whole and first_choice.spans == [(0, 21)]
    assert second_choice.spans == [(34, 44)] and text[34:44] == "Dddd dddd."
    assert second_choice.dropped == [(23, 33), (45, 56)]


def test_consecutive_sentences_join_and_the_gap_between_them_counts() -> None:
    c = Candidate((0, 32), [(0, 10), (11, 21), (22, 32)], np.array([0.9, 0.8, 0.0]))
    (choice,) = choose_sentences([c], 21, whole_share=0.0)
    assert choice.spans == [(0, 21)] and choice.cost == 21
    # Joined, the first two cost 21 (the space between them counts): over 20.
    (choice,) = choose_sentences([c], 20, whole_share=0.0)
    assert choice.spans == [(0, 10), (22, 32)] and choice.cost == 20


def test_sentence_vectors_survive_their_stored_form() -> None:
    rng = np.random.default_rng(3)
    raw = rng.normal(size=(5, 384)).astype(np.float32)
    spans = [(i * 10, i * 10 + 9) for i in range(5)]
    stored = SentenceVectors.decode(SentenceVectors.build(spans, raw).encode())
    assert stored is not None and stored.spans == tuple(spans)
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    assert np.all(np.sum(unit * stored.vectors, axis=1) > 0.99)
    assert SentenceVectors.decode({"spans": [[0, 1]], "int8": "not base64!"}) is None
    assert SentenceVectors.decode({"spans": [], "int8": ""}) is None


def test_a_question_vector_of_another_length_is_refused_never_scored_zero() -> None:
    stored = SentenceVectors.build([(0, 9), (10, 19)], np.eye(2, 384, dtype=np.float32))
    with pytest.raises(SchemaMismatchError, match="384") as info:
        stored.similarities(np.ones(256, dtype=np.float32) / 16.0)
    assert (info.value.expected_dimension, info.value.actual_dimension) == (256, 384)


def test_without_stored_sentences_packing_is_unchanged_and_says_why() -> None:
    _, hits, query = _hits(5, 6)
    bare = [Hit(h.id, h.text, h.metadata, h.score, h.rank) for h in hits]
    passages = [Passage.from_hit(h) for h in bare]
    trimmed = pack(passages, bare, 300, trim=True, query=query)
    plain = pack(passages, bare, 300)
    assert trimmed.trim.startswith("skipped: 6 hit(s) have no stored sentences")
    assert [p.text for p in trimmed.passages] == [p.text for p in plain.passages]


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ab .?!\n|", max_size=120), st.data())
def test_sentences_are_stripped_slices_covering_every_visible_character(
    text: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    spans = sentence_spans(text, start, end)
    covered = set()
    for s, e in spans:
        assert start <= s < e <= end
        assert not text[s].isspace() and not text[e - 1].isspace()
        assert "\n" not in text[s:e]  # a line (a table row) is never cut, never joined
        covered.update(range(s, e))
    assert all(i in covered for i in range(start, end) if not text[i].isspace())
    assert spans == sorted(spans)


def test_a_heading_line_comes_with_the_sentence_after_it_never_alone() -> None:
    # "### Sick Leave\n\nTen paid days. Unused days lapse." as sentences (the heading first).
    c = Candidate((0, 48), [(0, 14), (16, 30), (31, 48)], np.array([0.9, 0.5, 0.1]), frozenset({0}))
    assert choose_sentences([c], 16, whole_share=0.0)[0].spans == []  # room for the heading only
    assert choose_sentences([c], 30, whole_share=0.0)[0].spans == [(0, 30)]
    heading_only = Candidate((0, 14), [(0, 14)], np.array([0.9]), frozenset({0}))
    assert choose_sentences([heading_only], 100)[0].spans == []


def test_the_packer_hands_its_trimming_settings_to_the_sentence_choice() -> None:
    _, hits, query = _hits(7, 8)
    passages = [Passage.from_hit(h) for h in hits]
    budget = sum(len(h.text) for h in hits) // 2
    for share, decay in ((0.0, 0.1), (1.0, 0.1), (0.5, 0.0), (0.3, 2.0)):
        packed = pack(
            passages, hits, budget, trim=True, query=query, whole_share=share, rank_decay=decay
        )
        assert packed.trim == "sentences"
        alone = choose_sentences(
            [
                Candidate(
                    (h.start_index or 0, h.end_index or 0),
                    h.sentences.spans,
                    h.sentences.similarities(query),
                )
                for h in hits
                if h.sentences is not None
            ],
            budget,
            whole_share=share,
            rank_decay=decay,
        )
        spans = sorted((p.start_index, p.end_index) for p in packed.passages)
        chosen = sorted(s for c in alone for s in c.spans)
        assert spans == chosen, (share, decay)


@pytest.mark.parametrize(
    ("share", "decay"), [(-0.1, 0.1), (1.5, 0.1), (0.5, -1.0), (0.5, float("nan"))]
)
def test_bad_trimming_settings_are_refused_before_packing(share: float, decay: float) -> None:
    _, hits, query = _hits(3, 3)
    with pytest.raises(ConfigurationError, match=r"whole_share|rank_decay"):
        pack(
            [Passage.from_hit(h) for h in hits],
            hits,
            500,
            trim=True,
            query=query,
            whole_share=share,
            rank_decay=decay,
        )
