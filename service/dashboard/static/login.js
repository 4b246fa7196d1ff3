"use strict";
// The token is sent once, in a JSON body, and exchanged for an HttpOnly session cookie; it is
// never put in a URL or in the browser's storage, and the field is cleared at once.
(function () {
  const form = document.getElementById("login-form");
  if (!form) return;
  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    const input = document.getElementById("token");
    const token = input.value.trim();
    input.value = "";
    const r = await tunehub.api("POST", "/dashboard/session", { token: token });
    if (r.ok) {
      const next = form.dataset.next;
      // The server checked `next` is a path of this site; check again before leaving.
      const target = new URL(next, window.location.origin);
      window.location.assign(target.origin === window.location.origin ? target.href : "/");
    } else {
      document.getElementById("login-error").textContent =
        (r.data && typeof r.data.detail === "string") ? r.data.detail : "login failed (" + r.status + ")";
    }
  });
})();
