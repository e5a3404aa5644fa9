"""ai-parrot, imported for real, in a project root of its own.

ai-parrot's configuration (navconfig) reads ``$SITE_ROOT/env/<ENV>/.env`` and
``etc/config.ini`` and creates working folders in that root on import: the root is a
temporary directory, so nothing of it lands in the repository. Importing it also installs
uvloop's event-loop policy for the process; the default policy is put back, so that the
rest of the suite runs on the loop it always runs on.

Shared by the tests of this folder: the question, the ``HRBot(ParentChildMixin,
BasicBot)`` class, the two handbook documents as ai-parrot ``Document``s and the
``collection`` fixture holding them.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(tempfile.mkdtemp(prefix="ai-parrot-root-"))
# Made at import, so removed at exit: a fixture's teardown would run before the last
# test module that imported ai-parrot is done with it.
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)
(ROOT / "env" / "dev").mkdir(parents=True)
(ROOT / "etc").mkdir()
(ROOT / "env" / "dev" / ".env").write_text(
    "ENV=dev\nDEBUG=false\nPRODUCTION=false\nCONFIG_FILE=etc/config.ini\n", encoding="utf-8"
)
(ROOT / "etc" / "config.ini").write_text(
    "[navconfig]\nENV = dev\n[general]\nDEBUG = false\n[logging]\n"
    f"logdir = {ROOT / 'logs'}\nloglevel = WARNING\nlogging_echo = false\n"
    "filehandler_enabled = false\nlogstash_enabled = false\nmailer_enabled = false\n"
    "handlers = console\n",
    encoding="utf-8",
)
os.environ.setdefault("SITE_ROOT", str(ROOT))
os.environ.setdefault("ENV", "dev")
os.environ.setdefault("ENV_TYPE", "file")

_policy = asyncio.get_event_loop_policy()
from parrot.bots import BasicBot  # noqa: E402  (bootstraps navconfig now)
from parrot.stores.models import Document as ParrotDocument  # noqa: E402

import parrot_parents.integrations.ai_parrot  # noqa: E402,F401  (registers the types)

asyncio.set_event_loop_policy(_policy)

from parrot_parents import PgVectorStore  # noqa: E402
from parrot_parents.embeddings.sentence_transformer import (  # noqa: E402
    SentenceTransformerEmbeddings,
)
from parrot_parents.integrations.ai_parrot import (  # noqa: E402
    ParentChildMixin,
    ingest_documents,
)
from tests.conftest import fresh_store  # noqa: E402
from tests.integrations.conftest import LEAVE, PAY  # noqa: E402

QUESTION = "When are salaries paid?"


class HRBot(ParentChildMixin, BasicBot):  # type: ignore[misc]
    """The spec's mixin placed before ai-parrot's bot class."""


def documents() -> list[ParrotDocument]:
    """What an ai-parrot loader hands over: whole documents with their metadata."""
    return [
        ParrotDocument(page_content=PAY, metadata={"source": "pay.md", "department": "hr"}),
        ParrotDocument(page_content=LEAVE, metadata={"source": "leave.md", "department": "people"}),
    ]


@pytest.fixture
async def collection(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings
) -> AsyncIterator[PgVectorStore]:
    """The two documents moved in from ai-parrot ``Document``s, one call."""
    async with fresh_store(pg_dsn, embeddings) as store:
        # Children of at most 120 characters: each document has several.
        report = await ingest_documents(documents(), store, child_chunk_size=120)
        assert report.documents == 2 and not report.failed
        yield store
