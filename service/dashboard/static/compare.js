"use strict";
// Workload compare: the verified best schedules of one operator (GET /api/v1/schedules),
// grouped into families by their non-size parameters (strings and booleans: layout, dtype,
// ...), drawn as a scatter of the chosen axes, one colour per target.
(function () {
  const form = document.getElementById("compare-form");
  if (!form) return;
  const $ = function (id) { return document.getElementById(id); };
  const Y = {
    gflops: ["GFLOPS", function (s) { return s.gflops; }],
    latency: ["latency (us)", function (s) { return s.latency_us; }],
    speedup: ["speed-up over untuned (x)", function (s) { return s.speedup_vs_untuned; }],
  };
  let schedules = [];
  let loads = 0;  // the answer of an earlier operator's load must not overwrite a later one's
  const saved = JSON.parse(window.localStorage.getItem("tunehub.compare") || "{}");

  function family(s) {
    const p = s.workload.params || {};
    return Object.keys(p).sort().filter(function (k) {
      return typeof p[k] === "string" || typeof p[k] === "boolean";
    }).map(function (k) { return k + "=" + p[k]; }).join(" ") || "(no other parameters)";
  }

  function options(select, values, chosen) {
    select.textContent = "";
    values.forEach(function (v) {
      const o = document.createElement("option");
      o.value = v[0]; o.textContent = v[1];
      if (v[0] === chosen) o.selected = true;
      select.appendChild(o);
    });
  }

  function xAxes(rows) {
    const axes = [["flop", "FLOP (per call)"]];
    const keys = {};
    rows.forEach(function (s) {
      Object.keys(s.workload.params || {}).forEach(function (k) {
        if (typeof s.workload.params[k] === "number") keys[k] = true;
      });
    });
    Object.keys(keys).sort().forEach(function (k) { axes.push(["param:" + k, k + " (parameter)"]); });
    axes.push(["latency", "latency (us)"]);
    return axes;
  }

  function xOf(axis, s) {
    if (axis === "flop") return s.workload.flop;
    if (axis === "latency") return s.latency_us;
    return s.workload.params[axis.slice(6)];
  }

  function draw() {
    const rows = schedules.filter(function (s) { return family(s) === $("family").value; });
    const axis = $("x-axis").value, y = Y[$("y-axis").value];
    window.localStorage.setItem("tunehub.compare", JSON.stringify({
      x: axis, y: $("y-axis").value, logX: $("log-x").checked, logY: $("log-y").checked }));
    const label = $("x-axis").selectedOptions[0] ? $("x-axis").selectedOptions[0].textContent : axis;
    const points = rows.map(function (s) { return { x: xOf(axis, s), y: y[1](s), group: s.target.label }; })
      .filter(function (p) { return typeof p.x === "number" && typeof p.y === "number"; });
    window.tunehubPlot.scatter($("scatter"), points, label, y[0], $("log-x").checked, $("log-y").checked);
    $("compare-status").textContent = points.length + " " + $("operator").value + " schedules in this family.";
    const table = $("compare-rows");
    table.tHead.textContent = "";
    const head = table.tHead.insertRow();
    ["#", "params", "target", "latency", "GFLOPS", "speed-up"].forEach(function (h) {
      const th = document.createElement("th"); th.textContent = h; head.appendChild(th);
    });
    const body = table.tBodies[0];
    body.textContent = "";
    rows.forEach(function (s) {
      const tr = body.insertRow();
      const a = document.createElement("a"); a.href = "/schedules/" + s.id; a.textContent = s.id;
      tr.insertCell().appendChild(a);
      tr.insertCell().textContent = Object.keys(s.workload.params).map(function (k) { return k + "=" + s.workload.params[k]; }).join(" ");
      tr.insertCell().textContent = s.target.label;
      tr.insertCell().textContent = tunehub.latency(s.latency_us);
      tr.insertCell().textContent = tunehub.number(s.gflops);
      tr.insertCell().textContent = tunehub.number(s.speedup_vs_untuned) + "x";
    });
  }

  async function load() {
    const op = $("operator").value;
    const mine = ++loads;
    $("compare-status").textContent = "Loading " + op + "…";
    const r = await tunehub.api("GET", "/api/v1/schedules?limit=1000&operator=" + encodeURIComponent(op));
    if (mine !== loads) return;
    schedules = r.ok ? r.data : [];
    const families = [];
    schedules.forEach(function (s) { if (!families.includes(family(s))) families.push(family(s)); });
    options($("family"), families.map(function (f) { return [f, f]; }), families[0]);
    options($("x-axis"), xAxes(schedules), saved.x || "flop");
    options($("y-axis"), Object.keys(Y).map(function (k) { return [k, Y[k][0]]; }), saved.y || "gflops");
    draw();
  }

  if (saved.logX !== undefined) $("log-x").checked = saved.logX;
  if (saved.logY !== undefined) $("log-y").checked = saved.logY;
  $("operator").addEventListener("change", load);
  ["family", "x-axis", "y-axis", "log-x", "log-y"].forEach(function (id) { $(id).addEventListener("change", draw); });
  load();
})();
