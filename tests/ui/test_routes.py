"""The inspector's routes and door without a browser: Starlette's TestClient over the real app and
a real seeded store. Sign-in, the CSRF and origin checks, security headers, one actor per session,
error pages, escaping in the served HTML, and the vendored htmx's pinned hash."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import mempager
from mempager.procedural.lifecycle import decayed_confidence
from mempager.ui import Pagers, UiSettings, create_app
from mempager.ui.charts import decay_chart
from mempager.ui.security import CSP, SECURITY_HEADERS
from mempager.ui.web import STATIC, TEMPLATES

from .conftest import TOKEN, config

BASE = "http://127.0.0.1:8766"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def opened(seeded: mempager.Pager, store_dir: Path) -> Iterator[list[mempager.Pager]]:
    """Pagers the admin app opened for other actors (closed at the end of the module)."""
    extra: list[mempager.Pager] = []
    yield extra
    for p in extra:
        p.close()


@pytest.fixture(scope="module")
def admin_pagers(seeded: mempager.Pager, store_dir: Path, opened: list[mempager.Pager]) -> Pagers:
    def opener(actor: str) -> mempager.Pager:
        p = mempager.open(store_dir / "agent.duckdb", actor=actor, config=config())
        opened.append(p)
        return p

    return Pagers(seeded, opener)


def client(pagers: Pagers, admin: bool = False, login: bool = True) -> TestClient:
    c = TestClient(create_app(pagers, UiSettings(token=TOKEN, admin=admin)), base_url=BASE)
    if login:
        assert c.get(f"/login?token={TOKEN}", follow_redirects=False).status_code == 303
    return c


def csrf_of(c: TestClient) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/review").text)
    assert found is not None
    return found.group(1)


def pending_ids(p: mempager.Pager) -> list[str]:
    return sorted(i.id for i in p.review("pending"))


def test_without_a_session_every_page_sends_to_the_login(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded), login=False)
    for path in ("/memories", "/simulate?query=x", "/procedures", "/review", "/continuity", "/audit", "/"):
        r = c.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login", path
    assert c.get("/memories", headers={"HX-Request": "true"}).status_code == 401
    assert c.post("/review/abc", data={"decision": "accept"}).status_code == 401
    assert c.get("/static/htmx.min.js").status_code == 200  # public: the login page needs it
    assert c.get("/loginx", follow_redirects=False).status_code == 303  # only /login itself is public


def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded))
    copy = TestClient(c.app, base_url=BASE, cookies=dict(c.cookies))
    assert copy.get("/memories").status_code == 200
    assert c.post("/logout", data={"csrf_token": csrf_of(c)}, follow_redirects=False).status_code == 303
    assert copy.get("/memories", follow_redirects=False).status_code == 303  # to the login: the session is gone


def test_the_token_signs_in_with_a_private_cookie_and_a_wrong_one_does_not(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded), login=False)
    wrong = c.get("/login?token=" + "x" * 40, follow_redirects=False)
    assert wrong.status_code == 401 and "not this run's token" in wrong.text and "set-cookie" not in wrong.headers
    right = c.get(f"/login?token={TOKEN}", follow_redirects=False)
    assert right.status_code == 303 and right.headers["location"] == "/memories"  # away from the token
    cookie = right.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert TOKEN not in right.headers["set-cookie"]  # the cookie is a session id, not the token
    assert c.get("/memories").status_code == 200
    # a script may use the token itself as a bearer header
    bare = client(Pagers(seeded), login=False)
    assert bare.get("/memories", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert bare.get("/memories", headers={"Authorization": "Bearer nope"}, follow_redirects=False).status_code == 303


def test_every_response_carries_the_security_headers(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded))
    anonymous = client(Pagers(seeded), login=False)
    responses = [
        c.get("/memories"),
        c.get("/static/app.css"),
        c.get("/memory?uri=mem://neo/fact/0000000000000000"),  # an error page
        anonymous.get("/login"),
        anonymous.post("/review/x", data={}),  # refused
    ]
    for r in responses:
        for name, value in SECURITY_HEADERS:
            assert r.headers.get(name.decode()) == value.decode(), (r.url, name)
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


def test_a_foreign_host_is_refused(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded))
    assert c.get("/memories", headers={"Host": "evil.example:8766"}).status_code == 403  # DNS rebinding
    assert c.get("/memories", headers={"Host": "localhost:8766"}).status_code == 200


def test_a_change_needs_the_session_and_its_csrf_token_from_this_origin(seeded: mempager.Pager) -> None:
    """Without the token, with a wrong or missing CSRF token, or from another origin: 401/403 and
    the queue and the audit chain are exactly as before. Only the complete request decides."""
    c = client(Pagers(seeded))
    csrf = csrf_of(c)
    target = next(i for i in seeded.review("pending") if "staging" in str(i.payload.get("text")))
    before, audit_before = pending_ids(seeded), len(seeded.audit(limit=100_000))
    anonymous = client(Pagers(seeded), login=False)
    refused = [
        anonymous.post(f"/review/{target.id}", data={"decision": "accept", "csrf_token": csrf}),
        c.post(f"/review/{target.id}", data={"decision": "accept"}),
        c.post(f"/review/{target.id}", data={"decision": "accept", "csrf_token": "wrong-" + csrf}),
        c.post(f"/review/{target.id}", data={"decision": "accept"}, headers={"X-CSRF-Token": ""}),
        c.post(
            f"/review/{target.id}",
            data={"decision": "accept", "csrf_token": csrf},
            headers={"Origin": "http://evil.example"},
        ),
        c.post(
            f"/review/{target.id}",
            data={"decision": "accept", "csrf_token": csrf},
            headers={"Sec-Fetch-Site": "cross-site"},
        ),
    ]
    assert [r.status_code for r in refused] == [401, 403, 403, 403, 403, 403]
    assert pending_ids(seeded) == before and len(seeded.audit(limit=100_000)) == audit_before
    done = c.post(f"/review/{target.id}", data={"decision": "reject", "csrf_token": csrf}, follow_redirects=False)
    assert done.status_code == 303
    assert target.id not in pending_ids(seeded)
    assert seeded.review("rejected")[-1].id == target.id


def test_a_bearer_request_needs_no_csrf_token(seeded: mempager.Pager) -> None:
    """The header is not ambient (a page cannot make the browser send it): no CSRF to defend."""
    item = seeded.review("pending")[0]
    c = client(Pagers(seeded), login=False)
    r = c.post(
        f"/review/{item.id}",
        data={"decision": "bogus"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert r.status_code == 400 and "accept or reject" in r.text  # reached the route, which refused the value
    assert item.id in pending_ids(seeded)


def test_one_actor_per_session_unless_admin(seeded: mempager.Pager, admin_pagers: Pagers) -> None:
    plain = client(Pagers(seeded))
    assert "phone booth" not in plain.get("/memories?q=secret").text
    r = plain.post("/actor", data={"actor": "trinity", "csrf_token": csrf_of(plain)})
    assert r.status_code == 403 and "--admin" in r.text
    assert 'id="actor">neo<' in plain.get("/memories").text
    admin, other = client(admin_pagers, admin=True), client(admin_pagers, admin=True)
    assert "trinity" in admin.get("/memories").text  # the actor menu lists the store's actors
    r = admin.post("/actor", data={"actor": "trinity", "csrf_token": csrf_of(admin)}, follow_redirects=False)
    assert r.status_code == 303
    assert "phone booth" in admin.get("/memories?q=secret").text
    assert "phone booth" not in other.get("/memories?q=secret").text  # per session: the other browser stays


def test_memory_text_is_escaped_in_the_served_html(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded))
    html = c.get("/memories?tag=xss&limit=50").text
    assert "&lt;script&gt;window.__xss" in html and "<script>window.__xss" not in html
    assert "<img src=x" not in html and 'onerror="window' not in html
    assert 'href="javascript:' not in html and "<div hx-get" not in html
    assert len(re.findall(r"<script\b", html)) == 1  # htmx, nothing else


def test_no_template_turns_escaping_off() -> None:
    for path in TEMPLATES.glob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert "|safe" not in text.replace(" ", "") and "autoescape false" not in text, path.name


def test_errors_are_pages_that_say_what_to_do(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded))
    missing = c.get("/memory?uri=mem://neo/fact/0000000000000000")
    assert missing.status_code == 404 and "MemoryNotFound" in missing.text
    assert c.get("/memory?uri=" + seeded.recall("kubernetes")[0].uri.replace("neo", "trinity")).status_code == 404
    bad = c.get("/audit?limit=lots")
    assert bad.status_code == 400 and "limit must be a whole number" in bad.text
    assert c.get("/memories?since=not-a-time").status_code == 400


def test_every_screen_renders(seeded: mempager.Pager) -> None:
    c = client(Pagers(seeded))
    pattern = seeded.patterns()[0]
    for path, marker in [
        ("/memories", "kubernetes"),
        ("/memories?q=deploy&mode=retrieve", "lane-"),
        ("/simulate?query=deploy&goal=deploying+a+release", 'id="page-text"'),
        ("/procedures", "Deploy on Tuesdays"),
        (f"/pattern?uri={pattern.uri}", 'id="pattern-chart"'),
        ("/review?status=all", 'id="queue"'),
        ("/continuity", "No continuity yet"),
        ("/audit?since=", "verified"),
    ]:
        r = c.get(path)
        assert r.status_code == 200 and marker in r.text, path


def test_the_decay_chart_is_the_kernels_decay(seeded: mempager.Pager) -> None:
    now = datetime.now(timezone.utc)
    pattern = seeded.patterns()[0]
    chart = decay_chart([pattern], now, seeded.config)
    _, top, _, bottom = chart.plot
    last_y = float(chart.series[0].past.split()[-1].split(",")[1])  # the past line ends at now
    shown = (bottom - last_y) / (bottom - top)
    assert shown == pytest.approx(decayed_confidence(pattern, now, seeded.config), abs=0.01)


def test_the_vendored_htmx_is_the_pinned_one() -> None:
    pinned = re.search(r"`htmx.min.js` .*?`([0-9a-f]{64})`", (STATIC / "VENDORED.md").read_text(encoding="utf-8"))
    assert pinned is not None
    assert hashlib.sha256((STATIC / "htmx.min.js").read_bytes()).hexdigest() == pinned.group(1)


def test_every_template_and_static_file_is_in_the_wheels_package_data() -> None:
    """pyproject's package-data globs cover every file the app reads (tests/packaging builds the wheel)."""
    import fnmatch

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser, from PyPI
        import tomli as tomllib

    globs = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]
    ui_globs = globs["mempager.ui"]
    files = [p.relative_to(TEMPLATES.parent).as_posix() for d in (TEMPLATES, STATIC) for p in d.iterdir()]
    assert files and all(any(fnmatch.fnmatch(f, g) for g in ui_globs) for f in files), (files, ui_globs)
