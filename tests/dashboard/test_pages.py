"""The dashboard's pages in a real browser, against a seeded store (auth off)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import Site, Tab
from tests.dashboard.seed import XSS

PAGES = ("/", "/schedules", "/schedules/1", "/compare", "/jobs", "/jobs/1", "/jobs/2",
         "/models/1", "/workers", "/submit", "/login")  # fmt: skip


def _row_ids(page: Page, table: str) -> list[int]:
    cells = page.locator(f"#{table} tbody tr td:first-child").all_inner_texts()
    return [int(text) for text in cells]


def _expected(site: Site, operator: str, target_id: int, key: str) -> list[int]:
    """The same query answered from the store's plain lists, sorted here."""
    store = site.store
    rows = []
    for s in store.schedules.list_schedules(limit=100_000):
        workload = store.catalog.get_workload(s.workload_id)
        assert workload is not None
        if workload.operator == operator and s.target_id == target_id:
            value = {"gflops": workload.flop / s.latency_us / 1e3, "trials": s.trials}[key]
            rows.append((value, s.id))
    return [schedule_id for _, schedule_id in sorted(rows, reverse=True)]


def test_the_overview_counts_what_the_store_holds(tab: Tab, site: Site) -> None:
    page = tab.open("/")
    counts = dict(
        zip(
            page.locator(".counts span").all_inner_texts(),
            (int(b) for b in page.locator(".counts b").all_inner_texts()),
            strict=True,
        )
    )
    assert counts == {"targets": 3, "workloads": 20, "schedules": 60, "queued jobs": 1,
                      "running jobs": 1, "live workers": 1}  # fmt: skip
    assert len(_row_ids(page, "recent-jobs")) == 5
    expect(page.locator("h3").first).to_have_text(XSS)  # a label, shown as text
    tab.shot("overview")


def test_filter_and_sort_schedules_as_the_store_would(tab: Tab, site: Site) -> None:
    page = tab.open("/schedules")
    assert int(page.locator("#schedules").get_attribute("data-total") or 0) == 60
    page.select_option("select[name=operator]", "matmul")
    page.select_option("select[name=target]", "znver4-2c")
    page.click("#filters button[type=submit]")
    page.wait_for_url(lambda url: "/schedules?operator=matmul" in url)
    page.click("a.sort[data-sort=gflops]")
    page.wait_for_url(lambda url: "sort=gflops" in url)
    target_id = site.seeded.target_ids[1]
    expected = _expected(site, "matmul", target_id, "gflops")
    assert expected and _row_ids(page, "schedules") == expected
    query = parse_qs(urlparse(page.url).query)
    assert query["operator"] == ["matmul"] and query["target"] == ["znver4-2c"]
    assert query["sort"] == ["gflops"] and query["order"] == ["desc"]
    page.reload()  # the state is the URL: a reload (or a shared link) shows the same rows
    assert _row_ids(page, "schedules") == expected
    expect(page.locator("select[name=operator]")).to_have_value("matmul")
    page.click("a.sort[data-sort=gflops]")  # again: ascending
    page.wait_for_url(lambda url: "order=asc" in url)
    assert _row_ids(page, "schedules") == expected[::-1]
    tab.shot("schedules-filtered")
    # The JSON API answers the same query with the same rows.
    api = httpx.get(f"{site.url}/api/v1/schedules", params={
        "operator": "matmul", "target": "znver4-2c", "sort": "gflops", "limit": 1000})  # fmt: skip
    assert [s["id"] for s in api.json()] == expected
    assert api.headers["x-total-count"] == str(len(expected))


def test_sorted_by_fraction_of_peak_unmeasured_targets_last(tab: Tab, site: Site) -> None:
    """Targets whose peak was never measured, or measured under load, sort last."""
    page = tab.open("/schedules?sort=peak&order=desc")
    store = site.store
    peaks = {t.id: t.peak_gflops if t.peak_trusted else None for t in store.catalog.list_targets()}
    rows = []
    for s in store.schedules.list_schedules(limit=100_000):
        workload = store.catalog.get_workload(s.workload_id)
        assert workload is not None
        peak = peaks[s.target_id]
        share = workload.flop / s.latency_us / 1e3 / peak if peak else None
        rows.append((share is None, -(share or 0), -s.id, s.id))
    expected = [row[-1] for row in sorted(rows)][:50]
    assert _row_ids(page, "schedules") == expected
    last = page.locator("#schedules tbody tr").last.locator("td").nth(7)
    expect(last).to_have_text("–")  # the 50th row's target never measured its peak


def test_a_page_of_schedules_pages_on(tab: Tab, site: Site) -> None:
    page = tab.open("/schedules?sort=trials")
    first = _row_ids(page, "schedules")
    assert len(first) == 50
    expect(page.locator(".pager .range")).to_have_text("rows 1–50 of 60")
    page.click(".pager a[rel=next]")
    page.wait_for_url(lambda url: "offset=50" in url)
    second = _row_ids(page, "schedules")
    assert len(second) == 10 and not set(first) & set(second)


def test_schedule_detail_draws_every_record_and_toggles_log_scale(tab: Tab, site: Site) -> None:
    page = tab.open("/schedules/1")
    curve = page.locator("#curve")
    expect(curve).to_have_attribute("data-points", str(site.seeded.curve_records))
    drawn = page.evaluate("() => window.tunehubPlots.curve.data[0].length")
    assert drawn == site.seeded.curve_records
    records = httpx.get(f"{site.url}/api/v1/workloads/1/records", params={"target": "0" * 32})
    assert len(records.json()) == drawn
    failed = page.evaluate(
        "() => window.tunehubPlots.curve.data.at(-1).filter(v => v !== null).length"
    )
    assert failed == sum(r["failed"] for r in records.json()) > 0
    assert page.evaluate("() => window.tunehubPlots.curve.scales.y.distr") == 1
    page.check("#log-scale")
    expect(curve).to_have_attribute("data-scale", "log")
    assert page.evaluate("() => window.tunehubPlots.curve.scales.y.distr") == 3
    page.reload()  # the toggle is a view setting: it persists
    expect(page.locator("#log-scale")).to_be_checked()
    # The checkbox is restored before the records arrive: wait for the plot drawn from them.
    expect(curve).to_have_attribute("data-scale", "log")
    assert page.evaluate("() => window.tunehubPlots.curve.scales.y.distr") == 3
    page.uncheck("#log-scale")
    # The same workload on every target, the download button, the highlighted TIR.
    assert sorted(_row_ids(page, "other-targets")) == [1, 2, 3]
    expect(page.locator("#download")).to_have_attribute("href", "/api/v1/schedules/1/artifact")
    expect(page.locator("#sha256")).to_have_text("ab" * 32)
    # Its share of the roofline, as the API states it (its target's figures were measured).
    shown = httpx.get(f"{site.url}/api/v1/schedules/1").json()
    assert 0 < shown["of_roofline"] <= 1 and shown["roofline_us"] > 0
    expect(page.locator("#of-roofline")).to_contain_text(f"{100 * shown['of_roofline']:.3g}% of")
    assert page.locator("#tir span.hl-k").count() > 0  # keywords highlighted
    expect(page.locator("#tir")).to_contain_text(XSS)  # the TIR's comment, as text
    tab.shot("schedule-detail")


def test_compare_draws_a_family_across_targets(tab: Tab, site: Site) -> None:
    page = tab.open("/compare")
    page.select_option("#operator", "matmul")
    # The status names the operator drawn: the page's first load (its default operator) is over.
    expect(page.locator("#compare-status")).to_contain_text("matmul schedules in this family")
    family = page.locator("#family").input_value()
    assert "dtype=" in family
    points = int(page.locator("#scatter").get_attribute("data-points") or 0)
    rows = page.locator("#compare-rows tbody tr").count()
    assert points == rows > 0
    series = page.evaluate("() => window.tunehubPlots.scatter.series.slice(1).map(s => s.label)")
    assert set(series) <= {XSS, "znver4-2c", "skylake-avx512-4c"} and series
    assert page.evaluate("() => window.tunehubPlots.scatter.scales.x.distr") == 3  # log FLOP
    page.select_option("#y-axis", "latency")
    axis = page.evaluate("() => window.tunehubPlots.scatter.axes[1].label")
    assert axis == "latency (us)"
    tab.shot("compare")


def test_jobs_and_workers_show_state_errors_and_heartbeats(tab: Tab, site: Site) -> None:
    page = tab.open("/jobs?state=failed")
    assert _row_ids(page, "jobs") == [site.seeded.job_ids["failed"]]
    page.click("#jobs tbody a")
    expect(page.locator("#error")).to_have_text(f"search failed: {XSS}")
    expect(page.locator("#state")).to_have_text("failed")
    expect(page.locator("#cancel")).to_have_count(0)  # final: nothing to cancel
    tab.shot("job-failed")
    page = tab.open("/jobs")
    expect(page.locator("#models tbody tr")).to_have_count(1)
    page.click("#models tbody a")
    expect(page.locator("h1")).to_contain_text(f"resnet {XSS}")
    states = page.locator("#tasks tbody .badge").all_inner_texts()
    assert states == ["succeeded", "running"]
    assert page.locator("#tasks tbody .done").all_inner_texts() == ["16", "4"]
    tab.shot("model")
    page = tab.open("/workers")
    statuses = page.locator("#workers tbody .badge").all_inner_texts()
    assert sorted(statuses) == ["live", "stopped"]
    expect(page.locator("#workers tbody tr").first).to_contain_text(XSS)
    tab.shot("workers")


def test_the_submit_form_follows_each_operators_schema(tab: Tab) -> None:
    page = tab.open("/submit")
    page.wait_for_selector("#submit-form[data-ready=yes]", state="attached")
    page.select_option("#operator", "mul")
    rhs = page.locator("#param-rhs_shape")  # optional (anyOf with null): still a shape input
    expect(rhs).to_have_attribute("data-kind", "array")
    expect(rhs).to_have_value("64,1,1")
    page.select_option("#operator", "conv2d")
    expect(page.locator("#param-layout option")).to_have_text(["NCHW", "NHWC"])
    expect(page.locator("#param-stride")).to_have_attribute("data-kind", "integer")


def test_with_auth_off_a_write_another_site_makes_a_browser_send_is_refused(site: Site) -> None:
    job = site.seeded.job_ids["queued"]
    url = f"{site.url}/api/v1/jobs/{job}/cancel"
    for headers in ({"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
                    {"Origin": "http://127.0.0.1:1"}, {"Sec-Fetch-Site": "same-site"}):  # fmt: skip
        refused = httpx.post(url, headers=headers)
        assert refused.status_code == 403 and refused.json()["type"] == "csrf_failed"
    assert site.store.jobs.get(job).state == "queued"  # type: ignore[union-attr]


def test_no_page_runs_data_as_script_or_scrolls_sideways_at_375px(browser, site: Site) -> None:  # noqa: ANN001
    from tests.dashboard.conftest import open_tab

    for tab in open_tab(browser, site.url, width=375):
        for path in PAGES:
            page = tab.open(path)
            page.wait_for_load_state("networkidle")
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 375, f"{path} is {width} px wide at a 375-px viewport"
            name = "narrow" + (path.replace("/", "-") if path != "/" else "-overview")
            tab.shot(name)
        # The guard checks on leaving: no dialog opened (the XSS probes in labels, errors,
        # worker names, params and TIR stayed text), no request left the origin.
