"use strict";
// A model's page while it tunes or compiles: its progress and each task's job, refreshed from
// GET /api/v1/models/{id} every two seconds until the model is final.
(function () {
  const section = document.getElementById("model");
  const FINAL = ["succeeded", "failed", "cancelled"];
  if (FINAL.includes(section.dataset.state)) return;

  function show(m) {
    const state = document.getElementById("state");
    state.textContent = m.state;
    state.className = "badge " + m.state;
    section.dataset.state = m.state;
    document.getElementById("tasks-done").textContent = m.progress.tasks_done;
    document.getElementById("trials-done").textContent = m.progress.trials_done;
    document.getElementById("progress").value = m.progress.trials_done;
    const error = document.getElementById("error");
    error.hidden = !m.error;
    error.textContent = m.error || "";
    m.tasks.forEach(function (t) {
      const row = document.querySelector('#tasks tr[data-job="' + t.job.id + '"]');
      if (!row) return;
      const badge = row.querySelector(".badge");
      badge.textContent = t.job.state;
      badge.className = "badge " + t.job.state;
      row.querySelector(".done").textContent = t.job.trials_done;
      row.querySelector(".best").textContent = tunehub.latency(t.job.best_latency_us);
    });
  }

  const timer = window.setInterval(async function () {
    const r = await tunehub.api("GET", "/api/v1/models/" + section.dataset.model);
    if (!r.ok) return;
    show(r.data);
    if (FINAL.includes(r.data.state)) {
      window.clearInterval(timer);
      window.location.reload();  // the compiled result and download appear
    }
  }, 2000);
})();
