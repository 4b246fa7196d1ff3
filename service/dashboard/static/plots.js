"use strict";
// Plots drawn with uPlot (served from this app: static/vendor, built by `make install`).
// Every plot is kept in window.tunehubPlots under its element's id (the browser tests read it).
window.tunehubPlots = {};
window.tunehubPlot = (function () {
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#7f7f7f", "#393b79"];

  function colour(i) { return PALETTE[i % PALETTE.length]; }

  function noLine() { return null; }

  function mount(el, opts, data) {
    const old = window.tunehubPlots[el.id];
    if (old) old.destroy();
    el.textContent = "";
    if (typeof uPlot === "undefined") {
      el.textContent = "The plotting library is missing (run `make install`).";
      return null;
    }
    const plot = new uPlot(opts, data, el);
    window.tunehubPlots[el.id] = plot;
    return plot;
  }

  function width(el) { return Math.max(240, el.clientWidth || 600); }

  // The tuning curve: x = trial in measurement order; the best so far as a step line; each
  // measured candidate a point coloured by its job; failures as red points at the top.
  function curve(el, points, log) {
    const n = points.length;
    const xs = [], best = [], failed = [];
    const jobs = [];
    points.forEach(function (p) { if (!jobs.includes(p.job_id)) jobs.push(p.job_id); });
    const perJob = jobs.map(function () { return new Array(n).fill(null); });
    let low = Infinity, high = 0;
    points.forEach(function (p) {
      if (p.latency_us !== null) { low = Math.min(low, p.latency_us); high = Math.max(high, p.latency_us); }
    });
    const top = high > 0 ? high * 1.15 : 1;
    let running = null;
    points.forEach(function (p, i) {
      xs.push(i + 1);
      if (p.latency_us !== null) {
        running = running === null ? p.latency_us : Math.min(running, p.latency_us);
        perJob[jobs.indexOf(p.job_id)][i] = p.latency_us;
        failed.push(null);
      } else {
        failed.push(top);
      }
      best.push(running);
    });
    const series = [
      { label: "trial" },
      { label: "best so far", stroke: "#111", width: 2, paths: uPlot.paths.stepped({ align: 1 }),
        points: { show: false }, value: function (u, v) { return tunehub.latency(v); } },
    ];
    jobs.forEach(function (job, i) {
      series.push({ label: job === null ? "imported" : "job " + job, stroke: colour(i), paths: noLine,
        points: { show: true, size: 6, fill: colour(i) }, value: function (u, v) { return tunehub.latency(v); } });
    });
    series.push({ label: "failed", stroke: "#d62728", paths: noLine,
      points: { show: true, size: 8, fill: "#d62728" }, value: function (u, v) { return v === null ? "" : "failed"; } });
    const opts = {
      width: width(el), height: 320,
      scales: { x: { time: false }, y: { distr: log ? 3 : 1 } },
      axes: [
        { label: "trial (measurement order)" },
        { label: "latency (us)", size: 70 },
      ],
      series: series,
    };
    const plot = mount(el, opts, [xs, best].concat(perJob, [failed]));
    el.dataset.points = String(n);
    el.dataset.scale = log ? "log" : "linear";
    return plot;
  }

  // A scatter: one series of points per group, x sorted ascending (uPlot's data order).
  function scatter(el, rows, xLabel, yLabel, logX, logY) {
    const sorted = rows.slice().sort(function (a, b) { return a.x - b.x; });
    const groups = [];
    sorted.forEach(function (r) { if (!groups.includes(r.group)) groups.push(r.group); });
    const xs = sorted.map(function (r) { return r.x; });
    const ys = groups.map(function (g) {
      return sorted.map(function (r) { return r.group === g ? r.y : null; });
    });
    const series = [{ label: xLabel }].concat(groups.map(function (g, i) {
      return { label: g, stroke: colour(i), paths: noLine, points: { show: true, size: 8, fill: colour(i) } };
    }));
    const opts = {
      width: width(el), height: 360,
      scales: { x: { time: false, distr: logX ? 3 : 1 }, y: { distr: logY ? 3 : 1 } },
      axes: [{ label: xLabel }, { label: yLabel, size: 70 }],
      series: series,
    };
    const plot = mount(el, opts, [xs].concat(ys));
    el.dataset.points = String(rows.length);
    return plot;
  }

  window.addEventListener("resize", function () {
    Object.keys(window.tunehubPlots).forEach(function (id) {
      const el = document.getElementById(id);
      const plot = window.tunehubPlots[id];
      if (el && plot) plot.setSize({ width: width(el), height: plot.height });
    });
  });

  return { curve: curve, scatter: scatter };
})();
