"""The dashboard with no schedules and with 10,000: empty states, and one page of rows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.dashboard.conftest import Site, open_tab, serve


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("empty"), 0)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    yield from serve(tmp_path_factory.mktemp("big"), 10_000)


def test_empty_pages_say_what_to_do(browser: Browser, empty: Site) -> None:
    for tab in open_tab(browser, empty.url):
        page = tab.open("/")
        expect(page.locator(".empty").last).to_contain_text("No schedules yet")
        tab.shot("overview-empty")
        page = tab.open("/schedules")
        expect(page.locator(".empty")).to_contain_text("tunehub submit")
        page = tab.open("/compare")
        expect(page.locator(".empty")).to_contain_text("No schedules to compare")


def test_10000_schedules_answer_one_page(browser: Browser, big: Site, tmp_path: Path) -> None:
    started = time.perf_counter()
    html = httpx.get(f"{big.url}/schedules?sort=gflops", timeout=60)
    page_s = time.perf_counter() - started
    assert html.status_code == 200 and html.text.count("<tr>") == 51  # header + 50 rows
    api = httpx.get(f"{big.url}/api/v1/schedules", params={"limit": 50, "sort": "speedup"})
    assert len(api.json()) == 50 and api.headers["x-total-count"] == "10000"
    assert api.headers["link"] == '</api/v1/schedules?limit=50&sort=speedup&offset=50>; rel="next"'
    for tab in open_tab(browser, big.url):
        page = tab.open("/schedules?sort=gflops&offset=9950")
        expect(page.locator(".pager .range")).to_have_text("rows 9951–10000 of 10000")
        assert page.locator("#schedules tbody tr").count() == 50
        page = tab.open("/")
        expect(page.locator(".counts b").nth(2)).to_have_text("10000")
        tab.shot("overview-10000")
    print(f"/schedules with 10,000 schedules: {page_s * 1000:.0f} ms")
