"""The dashboard against `tunehub serve` as `make run` starts it (API + a local worker, SQLite):
a job submitted from the form, followed live to `succeeded`, and a running job cancelled from
its page."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from schedules_db.figures import is_quiet
from tests.dashboard.conftest import open_tab
from tests.e2e.helpers import start_serve, stop, unreachable_target_figures

pytestmark = pytest.mark.e2e
TRIALS = 12  # three batches of 4: the curve grows three times


# Every change of a curve's point count and a job's state, recorded by the page itself as it
# happens (a poll from the test, 0.1 s apart, could miss a step the page showed between two).
RECORD_CHANGES = """
window.tunehubSeen = [];
new MutationObserver(function (changes) {
  changes.forEach(function (c) {
    window.tunehubSeen.push([c.attributeName, c.target.getAttribute(c.attributeName)]);
  });
}).observe(document, {subtree: true, attributes: true,
                      attributeFilter: ["data-points", "data-state"]});
"""
FINAL = re.compile("^(succeeded|failed|cancelled)$")


def _watch(page: Page, until: str, timeout_s: float) -> list[int]:
    """The curve's point counts the job page showed, in order, until its state was ``until``
    (the page records them: `RECORD_CHANGES`)."""
    job = page.locator("#job")
    expect(job).to_have_attribute("data-state", FINAL, timeout=timeout_s * 1000)
    assert job.get_attribute("data-state") == until, page.inner_text("#error")
    changes = page.evaluate("window.tunehubSeen")
    states = [value for name, value in changes if name == "data-state"]
    assert set(states[:-1]) <= {"queued", "running"}, states
    return [int(value) for name, value in changes if name == "data-points"]


def test_submit_watch_and_cancel_against_make_runs_server(browser: Browser, tmp_path: Path) -> None:
    server, url, _ = start_serve(tmp_path)
    try:
        for tab in open_tab(browser, url):
            tab.page.add_init_script(RECORD_CHANGES)
            page = tab.open("/submit")
            page.wait_for_selector("#submit-form[data-ready=yes]", state="attached")
            page.select_option("#operator", "matmul")
            for name, value in (("M", "0"), ("N", "32"), ("K", "32")):
                page.fill(f"#param-{name}", value)
            page.fill("#trials", str(TRIALS))
            page.select_option("#space", "plain")
            page.click("#submit")
            message = page.locator('.field-error[data-field="params.M"]')
            expect(message).to_have_text("Input should be greater than or equal to 1")
            assert httpx.get(f"{url}/api/v1/jobs").headers["x-total-count"] == "0"
            tab.shot("submit-422")

            page.fill("#param-M", "32")
            page.click("#submit")
            page.wait_for_url(lambda u: "/jobs/" in u)
            seen = _watch(page, "succeeded", 400)
            expect(page.locator("#curve")).to_have_attribute("data-points", str(TRIALS))
            assert page.locator("#progress").evaluate("p => p.value") == TRIALS
            growing = [n for n in seen if 0 < n < TRIALS]
            assert growing, f"the curve never grew in steps: {seen}"
            assert seen == sorted(seen), seen
            expect(page.locator("#schedule-link a")).to_have_text("schedule 1")
            tab.shot("job-succeeded")
            # The worker measured its target's FMA peak at start: schedules show their share,
            # or, where the peak was measured under load (a busy test machine), say so.
            host = httpx.get(f"{url}/api/v1/schedules/1").json()["target"]
            assert host["peak_gflops"] > 0
            page = tab.open("/schedules/1")
            if is_quiet(host["peak_interference"]):
                expect(page.locator(".facts")).to_contain_text("% of")
            else:
                expect(page.locator(".facts")).to_contain_text("was measured under load")

            # The cancel must land while the job runs: with a roofline no kernel comes near,
            # the 400-trial job cannot stop at it in its first batch, as a plain
            # 256^3 matmul did on a fast host before the click came.
            unreachable_target_figures(f"sqlite:///{tmp_path / 'data' / 'tunehub.db'}")
            big = {"operator": {"name": "matmul", "params": {"M": 256, "N": 256, "K": 256}},
                   "target": "host", "trials": 400, "space": "plain"}  # fmt: skip
            job = httpx.post(f"{url}/api/v1/jobs", json=big, timeout=60).json()
            page = tab.open(f"/jobs/{job['id']}")
            expect(page.locator("#job")).to_have_attribute("data-state", "running", timeout=120_000)
            tab.shot("job-running")
            page.click("#cancel")
            expect(page.locator("#job")).to_have_attribute(
                "data-state", "cancelled", timeout=120_000
            )
            expect(page.locator("#cancel")).to_be_hidden()
            assert httpx.get(f"{url}/api/v1/jobs/{job['id']}").json()["state"] == "cancelled"
            tab.shot("job-cancelled")
    finally:
        stop(server)
