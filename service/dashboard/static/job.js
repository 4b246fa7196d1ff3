"use strict";
// A job's page, live: its server-sent events (the session cookie authenticates them) update
// the state, the progress bar and the best; each batch that lands redraws the tuning curve.
(function () {
  const section = document.getElementById("job");
  const id = section.dataset.job;
  const curveEl = document.getElementById("curve");
  const log = document.getElementById("log-scale");
  const FINAL = ["succeeded", "failed", "cancelled"];
  let points = [];
  let loading = null;
  log.checked = window.localStorage.getItem("tunehub.curve.log") === "1";

  function byId(name) { return document.getElementById(name); }

  function draw() { window.tunehubPlot.curve(curveEl, points, log.checked); }

  function loadCurve() {
    if (loading) return loading;
    const query = new URLSearchParams({ target: curveEl.dataset.target });
    loading = tunehub.api("GET", "/api/v1/workloads/" + curveEl.dataset.workload + "/records?" + query)
      .then(function (r) {
        loading = null;
        if (!r.ok) return;
        points = r.data;
        byId("curve-status").textContent = points.length + " records of this workload on this target.";
        draw();
      });
    return loading;
  }

  function show(job) {
    const state = byId("state");
    state.textContent = job.state;
    state.className = "badge " + job.state;
    section.dataset.state = job.state;
    byId("progress").value = job.progress.trials_done;
    byId("trials-done").textContent = job.progress.trials_done;
    byId("best").textContent = tunehub.latency(job.progress.best_latency_us);
    byId("gflops").textContent = tunehub.number(job.progress.best_gflops);
    byId("worker").textContent = job.worker || "–";
    byId("waiting").textContent = job.waiting_for || "";
    const error = byId("error");
    error.hidden = !job.error;
    error.textContent = job.error || "";
    if (job.schedule_id) {
      const link = byId("schedule-link");
      link.textContent = "→ ";
      const a = document.createElement("a");
      a.href = "/schedules/" + job.schedule_id;
      a.textContent = "schedule " + job.schedule_id;
      link.appendChild(a);
    }
    const cancel = byId("cancel");
    if (cancel && (FINAL.includes(job.state) || job.cancel_requested)) {
      cancel.disabled = true;
      if (FINAL.includes(job.state)) cancel.hidden = true;
      else cancel.textContent = "Cancelling…";
    }
  }

  log.addEventListener("change", function () {
    window.localStorage.setItem("tunehub.curve.log", log.checked ? "1" : "0");
    draw();
  });

  const cancel = byId("cancel");
  if (cancel) {
    cancel.addEventListener("click", async function () {
      cancel.disabled = true;
      const r = await tunehub.api("POST", "/api/v1/jobs/" + id + "/cancel");
      if (r.ok) show(r.data);
      else {
        cancel.disabled = false;
        byId("error").hidden = false;
        byId("error").textContent = (r.data && r.data.detail) || ("cancel failed: " + r.status);
      }
    });
  }

  loadCurve();
  if (!FINAL.includes(section.dataset.state)) {
    const events = new EventSource("/api/v1/jobs/" + id + "/events");
    const onJob = function (e) { show(JSON.parse(e.data)); loadCurve(); };
    events.addEventListener("state", onJob);
    events.addEventListener("progress", onJob);
    events.addEventListener("end", function () { events.close(); loadCurve(); });
  }
})();
