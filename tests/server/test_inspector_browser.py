"""End to end: a real headless Chromium drives the inspector against a real server.

The server holds the example corpus (examples/corpus), ingested with the real model; the
test types the token and a question in the page, then checks that what the page shows
(children, passages, highlighted hit spans, budget figures) is the JSON that /context
returns for the same request. Needs Debian's ``chromium`` and ``chromium-driver``
(.ci/run installs them); skipped with a reason when they are missing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.server.app import create_app
from tests.conftest import REPO_ROOT
from tests.migrations.support import database, example_database
from tests.server.conftest import AUTH, TOKEN

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
QUESTION = "How will I be paid, and when?"
BUDGET = 1500

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason=f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}); "
    "apt-get install -y chromium chromium-driver",
)


@pytest.fixture(scope="module")
def example_template(pg_dsn: str, template_dsn: str, embeddings: Any) -> Iterator[str]:
    """A copy of the bots template with the example corpus ingested for real (collection
    ``example``), built once for the module; each test works on a copy of its own."""
    with example_database(pg_dsn, template_dsn, embeddings) as dsn:
        yield dsn


@pytest.fixture
def example_dsn(pg_dsn: str, example_template: str) -> Iterator[str]:
    with database(pg_dsn, example_template) as dsn:
        yield dsn


@pytest.fixture
async def example_manager(
    example_dsn: str, embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[BotManager]:
    """A bot ``example`` (expansion on) over the example corpus, ingested for real."""
    monkeypatch.chdir(REPO_ROOT)
    bots_dsn = example_dsn
    async with BotRepository(bots_dsn) as repo:
        await repo.create({"name": "example", "collection": "example", "expand_to_parent": True})
    manager = BotManager(bots_dsn, embedding=embeddings)
    await manager.load()
    try:
        yield manager
    finally:
        await manager.close()


def make_driver(profile: str) -> Any:
    """Headless Chromium with no network of its own and no driver download."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1366,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def drive(base_url: str, screenshot: Path | None = None) -> dict[str, Any]:
    """Use the page as a person would (keyboard only) and read back what it shows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    profile = tempfile.mkdtemp(prefix="pp-chromium-")
    driver = make_driver(profile)
    try:
        wait = WebDriverWait(driver, 30)
        driver.get(base_url + "/ui")
        token = driver.find_element(By.ID, "token")
        assert driver.switch_to.active_element == token  # focus starts on the token
        token.send_keys(TOKEN, Keys.ENTER)
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "bot(s) loaded"))
        Select(driver.find_element(By.ID, "bot")).select_by_value("example")
        driver.find_element(By.ID, "budget").send_keys(str(BUDGET))
        question = driver.find_element(By.ID, "question")
        question.send_keys(QUESTION, Keys.ENTER)
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "passage(s)"))
        assert driver.find_element(By.ID, "error").text == ""
        children = [
            {
                "id": row.get_attribute("data-id"),
                "score": row.find_element(By.CSS_SELECTOR, 'td[data-col="score"]').get_attribute(
                    "data-value"
                ),
                "parent": row.find_element(By.CSS_SELECTOR, 'td[data-col="parent_id"]').text,
            }
            for row in driver.find_elements(By.CSS_SELECTOR, "#children tbody tr")
        ]
        passages = [
            {
                "id": li.get_attribute("data-id"),
                "text": driver.execute_script(
                    "return arguments[0].querySelector('.p-text').textContent", li
                ),
                "marks": driver.execute_script(
                    "return Array.from(arguments[0].querySelectorAll('mark'))"
                    ".map(m => m.textContent)",
                    li,
                ),
            }
            for li in driver.find_elements(By.CSS_SELECTOR, "#passages li.passage")
        ]
        shown = {
            "children": children,
            "passages": passages,
            "used": driver.find_element(By.ID, "budget-used").text,
            "budget": driver.find_element(By.ID, "budget-total").text,
            "context_chars": driver.find_element(By.ID, "context-chars").text,
            "packing": [
                (li.get_attribute("data-packing"), li.find_element(By.TAG_NAME, "code").text)
                for li in driver.find_elements(By.CSS_SELECTOR, "#packing li[data-packing]")
            ],
            "stages": [
                tr.get_attribute("data-stage")
                for tr in driver.find_elements(By.CSS_SELECTOR, "#timings tbody tr")
            ],
        }
        if screenshot is not None:  # the README's picture: the whole page, laptop width
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1280, min(int(height) + 120, 4000))
            driver.save_screenshot(str(screenshot))
        # The document view: the first passage's source opens its hierarchy.
        driver.find_element(By.CSS_SELECTOR, "#passages li.passage .p-head button.link").click()
        wait.until(ec.presence_of_element_located((By.ID, "doc-counts")))
        shown["doc_counts"] = driver.find_element(By.ID, "doc-counts").text
        shown["doc_hits"] = [
            li.get_attribute("data-id")
            for li in driver.find_elements(By.CSS_SELECTOR, "#document li.hit")
        ]
        return shown
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def expected_marks(passage: dict[str, Any], children: list[dict[str, Any]]) -> list[str]:
    """The passage's text under its hit children's spans, overlapping spans merged."""
    spans = sorted(
        (max(c["start_index"], passage["start_index"]), min(c["end_index"], passage["end_index"]))
        for c in children
        if c["document_id"] == passage["document_id"]
        and c["start_index"] < passage["end_index"]
        and c["end_index"] > passage["start_index"]
    )
    merged: list[list[int]] = []
    for s, e in spans:
        if merged and s < merged[-1][1]:  # overlapping children merge, touching ones not
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    at = passage["start_index"]
    return [passage["text"][s - at : e - at] for s, e in merged]


async def test_the_page_shows_what_context_returns(
    aiohttp_client: Any, example_manager: BotManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("selenium")
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must never download
    client = await aiohttp_client(create_app(example_manager, token=TOKEN))
    base_url = str(client.make_url("")).rstrip("/")
    shot = os.environ.get("PARROT_PARENTS_UI_SCREENSHOT")
    shown = await asyncio.to_thread(drive, base_url, Path(shot) if shot else None)

    resp = await client.post(
        "/api/v1/bots/example/context",
        json={"question": QUESTION, "budget": BUDGET},
        headers=AUTH,
    )
    body = await resp.json()
    assert resp.status == 200, body
    meta, passages = body["meta"], body["passages"]
    assert meta["expanded"] and meta["packing"]["budget"] == BUDGET

    assert [c["id"] for c in shown["children"]] == [c["id"] for c in meta["children"]]
    assert [float(c["score"]) for c in shown["children"]] == [c["score"] for c in meta["children"]]
    assert [c["parent"] for c in shown["children"]] == [c["parent_id"] for c in meta["children"]]

    assert [p["id"] for p in shown["passages"]] == [p["id"] for p in passages]
    assert [p["text"] for p in shown["passages"]] == [p["text"] for p in passages]
    assert [p["marks"] for p in shown["passages"]] == [
        expected_marks(p, meta["children"]) for p in passages
    ]
    assert any(p["marks"] for p in shown["passages"])

    assert int(shown["used"]) == meta["packing"]["used"] <= BUDGET
    assert int(shown["budget"]) == BUDGET
    assert int(shown["context_chars"]) == meta["context_chars"]
    packing = [(k, i) for k in ("substituted", "truncated", "cut") for i in meta["packing"][k]]
    packing += [("trimmed", t["id"]) for t in meta["packing"].get("trimmed", [])]
    assert shown["packing"] == packing
    assert shown["stages"] == list(meta["timings_ms"])

    doc = passages[0]["document_id"]
    rows = await (await client.get(f"/api/v1/bots/example/documents/{doc}", headers=AUTH)).json()
    counts = rows["counts"]
    assert (
        f"{counts['parent_chunk']} parent_chunk(s), {counts['child']} child(ren)"
        in (shown["doc_counts"])
    )
    hit_ids = {c["id"] for c in meta["children"] if c["document_id"] == doc}
    assert set(shown["doc_hits"]) == hit_ids and hit_ids


def drive_trimmed(base_url: str, budget: int) -> list[tuple[str, list[str]]]:
    """Ask with expansion off and a small budget; read back each trimmed hit the page
    lists and the sentences it shows as dropped."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    profile = tempfile.mkdtemp(prefix="pp-chromium-")
    driver = make_driver(profile)
    try:
        wait = WebDriverWait(driver, 30)
        driver.get(base_url + "/ui")
        driver.find_element(By.ID, "token").send_keys(TOKEN, Keys.ENTER)
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "bot(s) loaded"))
        Select(driver.find_element(By.ID, "bot")).select_by_value("example")
        Select(driver.find_element(By.ID, "expand")).select_by_value("false")
        driver.find_element(By.ID, "budget").send_keys(str(budget))
        driver.find_element(By.ID, "question").send_keys(QUESTION, Keys.ENTER)
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "passage(s)"))
        return [
            (
                li.find_element(By.TAG_NAME, "code").text,
                [
                    driver.execute_script("return arguments[0].textContent", d)
                    for d in li.find_elements(By.CSS_SELECTOR, "ul.dropped del")
                ],
            )
            for li in driver.find_elements(By.CSS_SELECTOR, '#packing li[data-packing="trimmed"]')
        ]
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


async def test_the_page_shows_what_trimming_dropped(
    aiohttp_client: Any, example_manager: BotManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("selenium")
    monkeypatch.setenv("SE_OFFLINE", "true")
    client = await aiohttp_client(create_app(example_manager, token=TOKEN))
    base_url = str(client.make_url("")).rstrip("/")
    shown = await asyncio.to_thread(drive_trimmed, base_url, 600)
    resp = await client.post(
        "/api/v1/bots/example/context",
        json={"question": QUESTION, "budget": 600, "expand_to_parent": False},
        headers=AUTH,
    )
    packing = (await resp.json())["meta"]["packing"]
    assert packing["trim"] == "sentences" and packing["trimmed"], packing
    assert shown == [(t["id"], t["dropped_text"]) for t in packing["trimmed"]]
