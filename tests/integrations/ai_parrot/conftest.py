"""ai-parrot, imported for real, in a project root of its own.

ai-parrot's configuration (navconfig) reads ``$SITE_ROOT/env/<ENV>/.env`` and
``etc/config.ini`` and creates working folders in that root on import: the root is a
temporary directory, so nothing of it lands in the repository. Importing it also installs
uvloop's event-loop policy for the process; the default policy is put back, so that the
rest of the suite runs on the loop it always runs on.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

ROOT = Path(tempfile.mkdtemp(prefix="ai-parrot-root-"))
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
from parrot.bots import BasicBot  # noqa: E402,F401  (bootstraps navconfig now)

import parrot_parents.integrations.ai_parrot  # noqa: E402,F401  (registers the types)

asyncio.set_event_loop_policy(_policy)
