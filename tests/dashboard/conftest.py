"""The dashboard's browser tests: Playwright (pinned) driving Debian's Chromium, against a real
uvicorn server over a seeded store.

Every page a test opens is guarded (`Guard`): the test fails on any request that leaves the
page's origin, any dialog (an XSS probe that ran), any uncaught script error and any
Content-Security-Policy violation. Screenshots go to ``$TUNEHUB_SCREENSHOTS`` (default
``build/screenshots``). Chromium missing is a failure, not a skip: ``make browser`` installs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, Request, sync_playwright

from schedules_db import Store, make_engine, upgrade_schema
from schedules_db.tokens import TokenStore
from service.entry.app import create_app
from service.shared.settings import Settings
from tests.conftest import ServerThread
from tests.dashboard.seed import Seeded, seed
from tuning.hardware.host import current_tvm_series

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TUNEHUB_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(os.environ.get("TUNEHUB_SCREENSHOTS", ROOT / "build" / "screenshots"))


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, driven by the pinned Playwright (no browser download)."""
    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing: run `make browser`"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


@dataclass
class Site:
    """A running server over a seeded store."""

    url: str
    store: Store
    settings: Settings
    seeded: Seeded
    tokens: dict[str, str] = field(default_factory=dict)


def serve(root: Path, schedules: int, **settings: Any) -> Iterator[Site]:
    """A server over a fresh SQLite store under ``root`` seeded with ``schedules`` schedules
    (`tests.dashboard.seed`; nothing at all for 0); with ``auth=True``, tokens ``reader``,
    ``submitter`` and ``coder``."""
    config = Settings(data_dir=root, **settings)
    engine = make_engine(config.store_url)
    upgrade_schema(engine)
    seeded = seed(engine, schedules) if schedules else Seeded([], 0, 0, 0, {})
    tokens = {}
    if config.auth:
        made = TokenStore(engine)
        for name, scopes in (("reader", ["read"]), ("submitter", ["submit"]),
                             ("coder", ["submit-code"])):  # fmt: skip
            tokens[name], _ = made.create(name, scopes)
    store = Store(engine, tvm_series=current_tvm_series())
    with ServerThread(create_app(config, run_reaper=False)) as server:
        yield Site(server.url, store, config, seeded, tokens)
    engine.dispose()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Auth off; 60 schedules on three targets (one labelled with an XSS probe)."""
    yield from serve(tmp_path_factory.mktemp("dashboard"), 60)


class Guard:
    """What a page did that a test must not let pass (see the module docstring)."""

    def __init__(self, page: Page, origin: str) -> None:
        self.origin = origin
        self.offsite: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("request", self._request)
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        page.on("console", self._console)

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)
        local = (self.origin + "/", "blob:" + self.origin + "/", "data:")  # blob: its own
        if not request.url.startswith(local):
            self.offsite.append(request.url)

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and "Failed to load resource" not in message.text:
            self.errors.append(f"console: {message.text}")

    def check(self) -> None:
        assert not self.offsite, f"requests left the page's origin: {self.offsite}"
        assert not self.dialogs, f"a dialog opened (script ran from data): {self.dialogs}"
        assert not self.errors, f"script errors or CSP violations: {self.errors}"


@dataclass
class Tab:
    """A guarded page on a site."""

    page: Page
    guard: Guard
    base: str

    def open(self, path: str) -> Page:
        self.page.goto(self.base + path)
        return self.page

    def shot(self, name: str) -> Path:
        """Save a full-page screenshot as ``name``.png under `SCREENSHOTS`."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def open_tab(browser: Browser, base: str, width: int = 1280) -> Iterator[Tab]:
    """A fresh browser context (no cookies, no storage) with one guarded page."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    guard = Guard(page, base)
    try:
        yield Tab(page, guard, base)
        guard.check()
    finally:
        context.close()


@pytest.fixture
def tab(browser: Browser, site: Site) -> Iterator[Tab]:
    """A guarded page on `site`."""
    yield from open_tab(browser, site.url)
