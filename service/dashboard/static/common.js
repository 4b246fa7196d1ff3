"use strict";
// What every page's scripts share: JSON calls to the API with the session's CSRF token,
// number formatting, logout. The session cookie is HttpOnly: scripts never see it, nor a token.
window.tunehub = (function () {
  function csrf() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET" && csrf()) headers["X-CSRF-Token"] = csrf();
    const response = await fetch(path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      data = null;
    }
    return { status: response.status, ok: response.ok, data: data };
  }

  function latency(us) {
    if (us === null || us === undefined) return "–";
    if (us < 1000) return (us < 100 ? us.toPrecision(3) : us.toFixed(0)) + " us";
    if (us < 1e6) return (us / 1e3).toPrecision(3) + " ms";
    return (us / 1e6).toPrecision(3) + " s";
  }

  function number(value) {
    if (value === null || value === undefined) return "–";
    return Math.abs(value) >= 1000 ? Math.round(value).toLocaleString("en") : value.toPrecision(3);
  }

  document.addEventListener("DOMContentLoaded", function () {
    const logout = document.getElementById("logout");
    if (logout) {
      logout.addEventListener("click", async function () {
        await api("POST", "/dashboard/logout");
        window.location.assign("/login");
      });
    }
  });

  return { api: api, latency: latency, number: number, csrf: csrf };
})();
