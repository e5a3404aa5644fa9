"""A small handbook ingested into PostgreSQL, and a bot over the shared example corpus,
for the framework adapters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore
from parrot_parents.sync import run_sync
from tests.conftest import Ingested

PAY = (
    "Salaries are paid twice a month, on the 15th and on the last business day. "
    "All pay is made by direct deposit into an account in your name.\n\n"
    "Overtime is paid in the following pay cycle, once the coordinator has signed off "
    "the hours, at one and a half times the hourly rate."
)
LEAVE = (
    "Every employee earns 1.5 vacation days per month of service. Up to five unused days "
    "carry over into the next year; the rest lapse on 31 March.\n\n"
    "Sick leave needs a doctor's note after three consecutive days away."
)


def handbook() -> list[Document]:
    return [
        Document(page_content=PAY, metadata={"document_id": "pay", "source": "pay.md"}),
        Document(page_content=LEAVE, metadata={"document_id": "leave", "source": "leave.md"}),
    ]


@pytest.fixture(scope="module")
def package_bot(example_corpus: Ingested, pg_dsn: str, embeddings: Any) -> Iterator[Chatbot]:
    """A bot over the shared example corpus (read only), made on the package's loop: a
    sync call runs there, and an adapter told ``on_package_loop`` awaits it there."""
    store = PgVectorStore(dsn=pg_dsn, table=example_corpus.collection, embedding=embeddings)
    run_sync(store.connect())
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    yield bot
    bot.close_sync()
