"""``parrot-parents serve`` as a real process: token from the environment, bots from rows."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from typing import Any

from parrot_parents.bots.repository import BotRepository


def _get(url: str, token: str | None = None, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode())
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_serve_with_a_token_from_the_environment(repo: BotRepository, bots_dsn: str) -> None:
    import asyncio

    env = {
        **os.environ,
        "PARROT_PARENTS_TOKEN": "from-env",
        "PARROT_PARENTS_DSN": bots_dsn,
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("PARROT_PARENTS_LLM_BASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "parrot_parents", "serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.to_thread(proc.stdout.readline)
        match = re.search(
            r"serving 2 bot\(s\) on (http://[\d.]+:\d+) \(auth: bearer token; "
            r"ask: off, no LLM configured\)",
            line,
        )
        assert match, line
        base = match.group(1)
        status, health = await asyncio.to_thread(_get, f"{base}/health")
        assert (status, health) == (200, {"status": "ok"})
        status, health = await asyncio.to_thread(_get, f"{base}/api/v1/health", "from-env")
        assert status == 200 and health["failed_bots"] == ["broken"]
        status, body = await asyncio.to_thread(_get, f"{base}/api/v1/bots")
        assert status == 401
        status, body = await asyncio.to_thread(
            _get, f"{base}/api/v1/bots/hr/context", "from-env", {"question": "pay day?"}
        )
        assert status == 200 and body["passages"]
        status, body = await asyncio.to_thread(
            _get, f"{base}/api/v1/bots/hr/ask", "from-env", {"question": "pay day?"}
        )
        assert status == 501
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err
    assert "bot 'broken' not loaded: collection: no collection named 'no_such_table'" in err
