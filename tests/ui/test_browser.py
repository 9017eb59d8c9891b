"""The inspector in a real browser: headless Debian chromium driven by Playwright, against the app
served by uvicorn on 127.0.0.1 (one server and one browser for the module; a fresh browser
context, with its own cookies, per test)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

import mempager
from mempager.ui import Pagers, UiSettings, create_app
from mempager.ui.serving import UiServer

from .conftest import QUEUED, TOKEN, XSS

WAIT_MS = 10_000


@pytest.fixture(scope="module")
def server(seeded: mempager.Pager) -> Iterator[UiServer]:
    running = UiServer(create_app(Pagers(seeded), UiSettings(token=TOKEN))).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context()
    ctx.set_default_timeout(WAIT_MS)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def page(context: Any, server: UiServer) -> Any:
    """A signed-in tab: the link `mempager ui` prints, opened."""
    tab = context.new_page()
    tab.goto(f"{server.url}/login?token={TOKEN}")
    assert tab.url == f"{server.url}/memories"  # redirected away from the token
    return tab


def csrf(page: Any) -> str:
    return str(page.locator("input[name=csrf_token]").first.get_attribute("value"))


def test_search_finds_a_memory_and_opens_it(page: Any, seeded: mempager.Pager) -> None:
    page.fill("input[name=q]", "kubernetes node pools")
    page.press("input[name=q]", "Enter")
    # the unfiltered list shows this memory too: wait for htmx to swap the results and push the url
    expect(page).to_have_url(re.compile(r"q=kubernetes"))  # shareable, reloadable
    hits = page.locator("#results tr.hit")
    expect(hits).to_have_count(1)
    expect(hits.first).to_contain_text("eu-west-1")
    hits.first.locator("a").first.click()
    page.wait_for_url(re.compile(r"/memory\?uri="))
    memory = seeded.recall("kubernetes")[0]
    assert page.locator("#memory-text").text_content() == memory.text
    assert page.locator("text=hash-v2-384").count() >= 1  # the vector's model


def test_the_simulator_shows_the_page_the_api_makes(page: Any, server: UiServer, seeded: mempager.Pager) -> None:
    goal, query = "deploying a release", "how do we deploy the release branches?"
    page.goto(f"{server.url}/simulate")
    page.fill("input[name=goal]", goal)
    page.fill("input[name=query]", query)
    page.click("#simulate button[type=submit]")
    page.locator("#page-text").wait_for()
    expected = seeded.page(query, goal=goal)
    assert page.locator("#page-text").text_content() == expected.render()
    shown = page.locator("#report-in tbody tr td:last-child").all_text_contents()
    assert [s.strip() for s in shown] == [s.uri for s in expected.report.snippets]
    sections = page.locator("#sections tbody tr td:first-child").all_text_contents()
    assert sections == list(expected.report.sections)
    assert "Deploy on Tuesdays" in expected.render()  # the goal's procedure made it into the page


def test_accept_and_reject_change_the_review_queue(page: Any, server: UiServer, seeded: mempager.Pager) -> None:
    page.goto(f"{server.url}/review")
    rota = seeded.review("pending")
    item = next(i for i in rota if i.payload.get("text") == QUEUED[0])
    row = page.locator(f"tr.item[data-id='{item.id}']")
    row.locator("button.accept").click()
    page.locator("#decided").filter(has_text=f"accepted {item.id}").wait_for()
    assert row.count() == 0  # gone from the pending list
    assert item.id not in {i.id for i in seeded.review("pending")}
    accepted = next(i for i in seeded.review("accepted") if i.id == item.id)
    assert accepted.result_uri is not None and seeded.get(accepted.result_uri).text == QUEUED[0]
    other = next(i for i in seeded.review("pending") if i.payload.get("text", "").startswith("queued xss"))
    page.locator(f"tr.item[data-id='{other.id}'] button.reject").click()
    page.locator("#decided").filter(has_text=f"rejected {other.id}").wait_for()
    assert other.id in {i.id for i in seeded.review("rejected")}
    assert not seeded.recall("queued xss")  # rejected: nothing written


def test_xss_payloads_render_inert(page: Any, server: UiServer, seeded: mempager.Pager) -> None:
    """Script tags, event handlers, javascript: URLs and htmx attributes in memory text are shown
    as text on every screen that shows text, and nothing of them runs."""
    dialogs: list[str] = []

    def caught(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", caught)
    uris = [m.uri for m in seeded.recall(tags=["xss"], limit=50)]
    assert len(uris) == len(XSS)
    screens = [
        "/memories?tag=xss",
        "/memories?q=xss&mode=retrieve",
        "/simulate?query=xss+script+img+svg+javascript&goal=xss",
        "/review?status=all",
        *[f"/memory?uri={u}" for u in uris],
    ]
    for path in screens:
        page.goto(server.url + path)  # returns after "load": every image has loaded or failed (onerror ran)
        assert page.evaluate("window.__xss") is None, path
        hostile = "img[src=x], svg[onload], [onerror], [onload], a[href^='javascript:'], [hx-trigger=load]"
        assert page.locator(hostile).count() == 0, path
        assert page.locator("script").count() == 1, path  # htmx only
    for u in uris:  # each payload is on the page, verbatim, as text
        page.goto(f"{server.url}/memory?uri={u}")
        assert page.locator("#memory-text").text_content() == seeded.get(u).text
    assert dialogs == []
    page.goto(f"{server.url}/memories")
    assert page.url.endswith("/memories")  # the htmx payload's hx-get="/logout" never fired


def test_a_change_without_the_token_or_with_a_wrong_csrf_token_changes_nothing(
    page: Any, context: Any, browser: Any, server: UiServer, seeded: mempager.Pager
) -> None:
    page.goto(f"{server.url}/review")
    item = seeded.review("pending")[0]
    good = csrf(page)
    before = sorted(i.id for i in seeded.review("pending"))
    audit = len(seeded.audit(limit=100_000))
    memories = seeded.stats()["memories"]
    stranger = browser.new_context()  # another browser profile: no session cookie
    try:
        no_token = stranger.request.post(
            f"{server.url}/review/{item.id}", form={"decision": "accept", "csrf_token": good}
        )
        assert no_token.status == 401
    finally:
        stranger.close()
    url = f"{server.url}/review/{item.id}"
    assert context.request.post(url, form={"decision": "accept"}).status == 403
    assert context.request.post(url, form={"decision": "accept", "csrf_token": "not-" + good}).status == 403
    assert (
        context.request.post(
            url, form={"decision": "accept", "csrf_token": good}, headers={"Origin": "http://evil.example"}
        ).status
        == 403
    )
    # a page on another origin posting the form, as a browser would: refused by SameSite and Origin
    assert sorted(i.id for i in seeded.review("pending")) == before
    assert len(seeded.audit(limit=100_000)) == audit and seeded.stats()["memories"] == memories


def test_one_actor_per_session(page: Any, context: Any, server: UiServer) -> None:
    assert page.locator("#actor").text_content() == "neo"
    assert page.locator("select[name=actor]").count() == 0  # no actor menu without --admin
    refused = context.request.post(f"{server.url}/actor", form={"actor": "trinity", "csrf_token": csrf(page)})
    assert refused.status == 403
    page.goto(f"{server.url}/memories?q=secret")
    assert page.locator("text=phone booth").count() == 0
