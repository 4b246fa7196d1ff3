"""The API's interactive docs in Chromium: Swagger UI and ReDoc render every operation from this
server alone (the guard fails the test on any request to another origin, any script error and
any Content-Security-Policy violation)."""

from __future__ import annotations

from tests.dashboard.conftest import Tab


def test_swagger_ui_renders_the_operations_offline(tab: Tab) -> None:
    page = tab.open("/docs")
    page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/v1/jobs" in [p.strip() for p in paths]
    tab.shot("docs-swagger")


def test_redoc_renders_the_operations_offline(tab: Tab) -> None:
    page = tab.open("/redoc")
    page.get_by_text("/api/v1/jobs/{job_id}/cancel").first.wait_for(timeout=30_000)
    assert page.locator("h1").first.inner_text().startswith("tunehub")
    tab.shot("docs-redoc")
