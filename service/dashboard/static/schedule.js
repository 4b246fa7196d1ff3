"use strict";
// The schedule page's tuning curve: every record of its (workload, target, space).
(function () {
  const el = document.getElementById("curve");
  const log = document.getElementById("log-scale");
  const status = document.getElementById("curve-status");
  let points = [];
  log.checked = window.localStorage.getItem("tunehub.curve.log") === "1";

  function draw() { window.tunehubPlot.curve(el, points, log.checked); }

  log.addEventListener("change", function () {
    window.localStorage.setItem("tunehub.curve.log", log.checked ? "1" : "0");
    draw();
  });

  const query = new URLSearchParams({ target: el.dataset.target });
  if (el.dataset.space) query.set("space", el.dataset.space);
  tunehub.api("GET", "/api/v1/workloads/" + el.dataset.workload + "/records?" + query).then(function (r) {
    if (!r.ok) { status.textContent = "Could not load the records (" + r.status + ")."; return; }
    points = r.data;
    const failed = points.filter(function (p) { return p.failed; }).length;
    status.textContent = points.length + " records, " + failed + " failed.";
    draw();
  });
})();
