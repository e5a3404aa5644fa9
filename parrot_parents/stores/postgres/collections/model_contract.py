"""The embedding model of a collection: recorded with its vectors, checked before any embed.

The model is recorded in the comment of the ``embedding`` column, as
``parrot-parents model: {json}``::

    {"model": {"name": ..., "dimension": 384, "probe": [...]},
     "reembed_from": null | {...}, "cursor": null | "<last document id re-embedded>"}

so it is dropped with the table, copied by ``pg_dump`` and read without a model. Two
models are the same when their probes (the vector of :data:`PROBE_TEXT`) have a cosine of
at least :data:`SAME_MODEL_COSINE`; the name is shown, not compared. The record is read
at most every :data:`RECHECK_S` seconds. A collection without a record takes the model of
its next write; while ``reembed_from`` is set (``reindex --model``,
:mod:`parrot_parents.loaders.reembed`) every embedding search and write is refused. The
guarantees: docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.errors import ModelMismatchError
from parrot_parents.stores.identifiers import CollectionName
from parrot_parents.stores.postgres.collections.setup import embedding_column
from parrot_parents.stores.postgres.connections.reads import read, write

__all__ = [
    "PROBE_TEXT",
    "RECHECK_S",
    "SAME_MODEL_COSINE",
    "ModelContract",
    "ModelFingerprint",
    "ModelRecord",
    "fingerprint",
]

logger = logging.getLogger(__name__)

#: The text every fingerprint embeds (never change it: recorded probes were made from it).
PROBE_TEXT = (
    "parrot-parents model fingerprint: the quick brown fox jumps over the lazy dog; "
    "invoices are paid within 30 days. 0123456789"
)
#: Probes at least this similar (cosine) are one model.
SAME_MODEL_COSINE = 0.999
#: Seconds a store trusts the record it read before reading it again.
RECHECK_S = 10.0
_MARK = "parrot-parents model: "


class Embeds(Protocol):
    """What a fingerprint needs of an embeddings object."""

    def embed_query(self, text: str) -> list[float]: ...


@dataclass(frozen=True)
class ModelFingerprint:
    """A model's name (shown), dimension and probe vector (compared)."""

    name: str
    dimension: int
    probe: tuple[float, ...]

    @property
    def digest(self) -> str:
        """12 hex characters of the sha256 of the probe at 2 decimals (for people)."""
        rounded = ",".join(f"{v:.2f}" for v in self.probe)
        return hashlib.sha256(rounded.encode("ascii")).hexdigest()[:12]

    def describe(self) -> str:
        """``'NAME' (fingerprint 1a2b3c4d5e6f, 384 dimensions)``."""
        return f"{self.name!r} (fingerprint {self.digest}, {self.dimension} dimensions)"

    def same_model(self, other: ModelFingerprint) -> bool:
        """Whether ``other`` makes the same vectors (same dimension, probes' cosine at
        least :data:`SAME_MODEL_COSINE`)."""
        if self.dimension != other.dimension or len(self.probe) != len(other.probe):
            return False
        dot = sum(a * b for a, b in zip(self.probe, other.probe, strict=True))
        norm = math.sqrt(sum(a * a for a in self.probe) * sum(b * b for b in other.probe))
        return norm > 0 and dot / norm >= SAME_MODEL_COSINE

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelFingerprint:
        probe = tuple(float(v) for v in data["probe"])
        return cls(name=str(data["name"]), dimension=int(data["dimension"]), probe=probe)

    @classmethod
    def of_vector(cls, name: str, vector: Sequence[float]) -> ModelFingerprint:
        """The fingerprint of a model named ``name`` whose probe vector is ``vector``."""
        values = [float(v) for v in vector]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return cls(name, len(values), tuple(round(v / norm, 5) for v in values))


@dataclass(frozen=True)
class ModelRecord:
    """A collection's record: its model, and an unfinished re-embed's origin and cursor."""

    model: ModelFingerprint
    reembed_from: ModelFingerprint | None = None
    cursor: str | None = None

    @property
    def reembedding(self) -> bool:
        """True while a re-embed is unfinished (the vectors are of two models)."""
        return self.reembed_from is not None

    def to_comment(self) -> str:
        return _MARK + json.dumps(asdict(self), ensure_ascii=True, sort_keys=True)

    @classmethod
    def from_comment(cls, comment: str | None) -> ModelRecord | None:
        """The record in a column comment; None for no comment or someone else's."""
        if not comment or not comment.startswith(_MARK):
            return None
        try:
            data = json.loads(comment[len(_MARK) :])
            origin = data.get("reembed_from")
            return cls(
                model=ModelFingerprint.from_json(data["model"]),
                reembed_from=None if origin is None else ModelFingerprint.from_json(origin),
                cursor=data.get("cursor"),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            logger.warning("the embedding column's model record is unreadable; ignored")
            return None


_FINGERPRINTS: weakref.WeakKeyDictionary[Any, ModelFingerprint] = weakref.WeakKeyDictionary()


def fingerprint(embedding: Embeds) -> ModelFingerprint:
    """The fingerprint of ``embedding``'s model (loads it; computed once per object).

    Raises:
        ModelLoadError: the model cannot be loaded.
    """
    found = _FINGERPRINTS.get(embedding)
    if found is None:
        # The name the object gives its model, else its class name.
        name = str(getattr(embedding, "model_name", type(embedding).__name__))
        found = ModelFingerprint.of_vector(name, embedding.embed_query(PROBE_TEXT))
        _FINGERPRINTS[embedding] = found
    return found


class ModelContract:
    """The model record of the collection ``name``, as one store reads, checks and writes it.

    Every read and write of the record goes through the store's outage handling
    (:func:`~parrot_parents.stores.postgres.connections.reads.read`,
    :func:`~parrot_parents.stores.postgres.connections.reads.write`): each is idempotent,
    so one that meets a pooled connection a restart left dead runs again on a fresh one
    instead of failing.
    """

    def __init__(self, name: CollectionName) -> None:
        self.schema = name.schema
        self.table = name.table
        #: Set by a re-embed pass: its own writes of the new model are let through.
        self.reembedding = False
        self._record: ModelRecord | None = None
        self._read_at = -math.inf
        self._passed: tuple[ModelRecord | None, ModelFingerprint, bool] | None = None
        self._warned = False

    def forget(self) -> None:
        """Drop what was read (after a close or a drop): the next check reads again."""
        self._record, self._read_at, self._passed = None, -math.inf, None

    async def read(self, conn: AsyncConnection) -> ModelRecord | None:
        """The record as the database has it now (also remembered)."""
        comment = await embedding_column(
            conn, self.schema, self.table, "col_description(c.oid, a.attnum)"
        )
        self._record = ModelRecord.from_comment(comment)
        self._read_at = time.monotonic()
        return self._record

    async def write(self, conn: AsyncConnection, record: ModelRecord) -> None:
        """Record ``record`` in ``conn``'s transaction (it commits with the caller's work)."""
        # A COMMENT takes no bound parameter: E'...' with backslashes and quotes doubled
        # reads the same whatever standard_conforming_strings is (the JSON is ASCII).
        value = record.to_comment().replace("\\", "\\\\").replace("'", "''")
        column = f'"{self.schema}"."{self.table}".embedding'
        await conn.execute(text(f"COMMENT ON COLUMN {column} IS E'{value}'"))
        self._record = record
        self._read_at = time.monotonic()

    async def record(self, engine: AsyncEngine, *, fresh: bool = False) -> ModelRecord | None:
        """The record, read again when older than :data:`RECHECK_S` (or ``fresh``)."""
        if fresh or time.monotonic() - self._read_at > RECHECK_S:
            await read(engine, f"reading the model of {self.table}", self.read)
        return self._record

    async def check(self, engine: AsyncEngine, embedding: Embeds, *, writing: bool) -> None:
        """Refuse ``embedding`` unless the collection's vectors are its model's.

        A collection without a record gets ``embedding``'s model recorded when
        ``writing`` (the write is about to store that model's vectors), and is accepted
        when reading, with a warning when it holds vectors (of a model not recorded).
        Cheap once passed: the probe is computed once per embeddings object, the record
        read at most every :data:`RECHECK_S` seconds.

        Raises:
            ModelMismatchError: another model, or an unfinished re-embed (both named).
            ModelLoadError: ``embedding``'s model cannot be loaded.
            StoreError: the database failed.
        """
        record = await self.record(engine)
        actual = _FINGERPRINTS.get(embedding)
        if actual is None:
            actual = await asyncio.to_thread(fingerprint, embedding)
        if self._passed == (record, actual, writing) or (
            self._passed == (record, actual, True) and not writing
        ):
            return
        if record is None and writing:
            # Under the record's lock, so that two first writers agree.
            before, after = await self._update(
                engine, lambda r: ModelRecord(actual) if r is None else None
            )
            record = after or before
        if record is None:
            # An empty collection (a first write refused, say) holds no other model's
            # vectors: there is nothing to warn of.
            if not self._warned and await self._holds_vectors(engine):
                self._warned = True
                logger.warning(
                    "collection %r records no embedding model (made before models were "
                    "recorded); its next write records %s",
                    self.table,
                    actual.describe(),
                )
        else:
            self._compare(record, actual, writing=writing)
        self._passed = (record, actual, writing)

    async def _holds_vectors(self, engine: AsyncEngine) -> bool:
        """Whether any row of the collection has a vector."""
        sql = text(
            f'SELECT EXISTS (SELECT 1 FROM "{self.schema}"."{self.table}"'
            " WHERE embedding IS NOT NULL)"
        )

        async def holds(conn: AsyncConnection) -> bool:
            return bool((await conn.execute(sql)).scalar())

        return await read(engine, f"reading {self.table}", holds)

    async def _update(
        self, engine: AsyncEngine, change: Callable[[ModelRecord | None], ModelRecord | None]
    ) -> tuple[ModelRecord | None, ModelRecord | None]:
        """``(before, after)``: the record read under a lock that serialises its writers,
        and ``change(before)``, recorded in the same transaction unless it is None."""

        async def update(conn: AsyncConnection) -> tuple[ModelRecord | None, ModelRecord | None]:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                {"key": f"{self.schema}.{self.table}#model"},
            )
            before = await self.read(conn)
            after = change(before)
            if after is not None:
                await self.write(conn, after)
            return before, after

        return await write(engine, f"recording the model of {self.table}", update)

    async def begin_reembed(
        self, engine: AsyncEngine, target: ModelFingerprint
    ) -> ModelRecord | None:
        """Start (or resume) a re-embed to ``target``: the record that the pass continues
        from, or None when the collection is already ``target``'s (nothing to do).

        A new pass records ``target`` with ``reembed_from`` (the model it replaces: from
        then on, searches and other writes are refused) and no cursor; an unfinished pass
        to ``target`` is resumed at its cursor; one to another model starts again from the
        first document (it keeps the original ``reembed_from``).
        """

        def begin(record: ModelRecord | None) -> ModelRecord | None:
            if record is not None and record.model.same_model(target):
                return None
            if record is None:
                origin = ModelFingerprint("(not recorded)", target.dimension, ())
            else:
                origin = record.reembed_from or record.model
            return ModelRecord(target, reembed_from=origin, cursor=None)

        before, after = await self._update(engine, begin)
        record = after or (before if before is not None and before.reembedding else None)
        if record is not None:
            self.reembedding = True
        return record

    async def advance_reembed(self, engine: AsyncEngine, cursor: str | None, *, done: bool) -> None:
        """Record a re-embed's progress: every document up to ``cursor`` (by id) holds the
        new model's vectors; ``done`` records the pass finished (one model again)."""

        def advance(record: ModelRecord | None) -> ModelRecord | None:
            if record is None or not record.reembedding:
                return None
            if done:
                return ModelRecord(record.model)
            return ModelRecord(record.model, record.reembed_from, cursor)

        await self._update(engine, advance)

    def _compare(self, record: ModelRecord, actual: ModelFingerprint, *, writing: bool) -> None:
        finish = f"parrot-parents reindex --model {record.model.name} --collection {self.table}"
        if record.reembed_from is not None:
            if self.reembedding and writing and record.model.same_model(actual):
                return
            raise ModelMismatchError(
                f"collection {self.table!r} is being re-embedded from "
                f"{record.reembed_from.describe()} to {record.model.describe()}; it holds "
                f"vectors of both, so it cannot be searched or written with "
                f"{actual.describe()} until the pass finishes",
                **_models(record.model, actual),
                hint=f"finish it: `{finish}`",
            )
        if not record.model.same_model(actual):
            raise ModelMismatchError(
                f"collection {self.table!r} was embedded with {record.model.describe()}, "
                f"but this {'write' if writing else 'search'} embeds with "
                f"{actual.describe()}",
                **_models(record.model, actual),
                hint=f"use the collection's model (--model {record.model.name}), or "
                f"re-embed it: `parrot-parents reindex --model {actual.name} "
                f"--collection {self.table}`",
            )


def _models(recorded: ModelFingerprint, actual: ModelFingerprint) -> dict[str, Any]:
    """The :class:`~parrot_parents.errors.ModelMismatchError` fields of two models."""
    return {
        "recorded": recorded.describe(),
        "actual": actual.describe(),
        "expected_dimension": recorded.dimension,
        "actual_dimension": actual.dimension,
    }
