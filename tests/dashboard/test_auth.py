"""The dashboard with auth on: the token prompt, the session cookie, what scopes show, logout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import Site, Tab, open_tab, serve


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Auth on, no anonymous reads; tokens reader (read), submitter (submit), coder
    (submit-code); 6 schedules."""
    yield from serve(tmp_path_factory.mktemp("secured"), 6, auth=True)


def _login(tab: Tab, token: str, then: str = "/") -> Page:
    page = tab.open(then)
    page.wait_for_url(lambda url: "/login?next=" in url)
    page.fill("#token", token)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(tab.base + then)
    return page


def _fetch_status(page: Page, method: str, path: str, csrf: bool = True) -> int:
    """The status of a same-origin fetch made by the page's own script context."""
    return int(
        page.evaluate(
            """async ([method, path, csrf]) => {
                const headers = csrf ? {"X-CSRF-Token": tunehub.csrf()} : {};
                return (await fetch(path, {method, headers, credentials: "same-origin"})).status;
            }""",
            [method, path, csrf],
        )
    )


def test_the_dashboard_asks_for_a_token_and_refuses_a_bad_one(
    browser: Browser, secured: Site
) -> None:
    for tab in open_tab(browser, secured.url):
        page = tab.open("/schedules")
        page.wait_for_url(lambda url: "/login?next=/schedules" in url)
        page.fill("#token", "thb_not-a-token")
        page.click("#login-form button[type=submit]")
        expect(page.locator("#login-error")).to_have_text("unknown API token")
        tab.shot("login")
        page = _login(tab, secured.tokens["reader"], "/schedules?sort=trials&order=asc")
        assert page.locator("#schedules tbody tr").count() == 6
    for tab in open_tab(browser, secured.url):  # a crafted `next` cannot send you elsewhere
        for crafted in ("//evil.example/", "/\\evil.example/", "https://evil.example/",
                        "/%09/evil.example/"):  # fmt: skip
            page = tab.open(f"/login?next={crafted}")
            page.fill("#token", secured.tokens["reader"])
            page.click("#login-form button[type=submit]")
            page.wait_for_url(tab.base + "/")
            tab.page.context.clear_cookies()


def test_a_reader_sees_no_action_it_may_not_take_and_logout_ends_the_session(
    browser: Browser, secured: Site
) -> None:
    token = secured.tokens["reader"]
    for tab in open_tab(browser, secured.url):
        page = _login(tab, token)
        expect(page.locator(".who")).to_contain_text("reader")
        expect(page.locator("header nav a")).to_have_text(
            ["Schedules", "Compare", "Jobs", "Workers"]
        )  # no Submit
        page = tab.open(f"/jobs/{secured.seeded.job_ids['running']}")
        expect(page.locator("#state")).to_have_text("running")
        expect(page.locator("#cancel")).to_have_count(0)
        page = tab.open("/submit")
        expect(page.locator(".empty")).to_contain_text("may not submit")
        # The API behind the pages answers the session as the reader: writes are 403.
        assert _fetch_status(page, "GET", "/api/v1/me") == 200
        assert _fetch_status(page, "POST", "/api/v1/jobs/3/cancel") == 403
        # Neither the URL nor the storage of any request ever held the token; the cookie
        # is HttpOnly: the page's script cannot read it.
        assert not [url for url in tab.guard.requests if token in url]
        assert token not in page.evaluate("() => JSON.stringify(window.localStorage)")
        assert token not in page.evaluate("() => JSON.stringify(window.sessionStorage)")
        assert page.evaluate("() => document.cookie") == ""
        cookies = tab.page.context.cookies()
        assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [
            ("tunehub_session", True, "Strict")
        ]
        assert token not in cookies[0]["value"]
        page.click("#logout")
        page.wait_for_url(lambda url: "/login" in url)
        assert _fetch_status(page, "GET", "/api/v1/me") == 401
        page = tab.open("/")
        page.wait_for_url(lambda url: "/login?next=/" in url)


def test_scopes_decide_submit_raw_tir_and_cancel(browser: Browser, secured: Site) -> None:
    for tab in open_tab(browser, secured.url):
        page = _login(tab, secured.tokens["submitter"], "/submit")
        page.wait_for_selector("#submit-form[data-ready=yes]", state="attached")
        expect(page.locator("#submit-tabs a")).to_have_text(["catalog operator"])  # no raw TIR
        page = tab.open(f"/jobs/{secured.seeded.job_ids['running']}")
        expect(page.locator("#cancel")).to_have_count(0)  # submitted by someone else
        tab.shot("submit-scoped")
    for tab in open_tab(browser, secured.url):
        page = _login(tab, secured.tokens["coder"], "/submit")
        expect(page.locator("#submit-tabs a")).to_have_text(["catalog operator", "raw TIR"])
        page.click("#submit-tabs a[data-tab=tir]")
        expect(page.locator("#tir")).to_be_visible()
        page.fill("#tir", "import os\nos.system('id')")
        page.fill("#trials", "4")
        page.click("#submit")
        # No worker registered "host" here, and coder is no admin: the server's 422 names
        # body.target, and its message lands next to that field; nothing is written.
        message = page.locator('.field-error[data-field="target"]')
        expect(message).to_contain_text("no worker has registered this target")
        jobs = len(secured.store.jobs.list_jobs(limit=1000))
        assert jobs == len(secured.seeded.job_ids)


def test_a_session_write_without_its_csrf_token_is_refused(browser: Browser, secured: Site) -> None:
    for tab in open_tab(browser, secured.url):
        page = _login(tab, secured.tokens["submitter"])
        job = secured.seeded.job_ids["queued"]
        assert _fetch_status(page, "POST", f"/api/v1/jobs/{job}/cancel", csrf=False) == 403
        assert _fetch_status(page, "POST", "/dashboard/logout", csrf=False) == 403
        assert _fetch_status(page, "GET", "/api/v1/me") == 200  # still logged in
