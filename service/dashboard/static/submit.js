"use strict";
// The job form, built from GET /api/v1/operators (each operator's JSON Schema: fields, limits,
// enums, defaults). The browser does not validate: the server's 422 names each bad field
// (loc) and its message is shown next to that field.
(function () {
  const form = document.getElementById("submit-form");
  if (!form) return;
  const $ = function (id) { return document.getElementById(id); };
  let operators = [];
  let tab = "operator";

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function field(name, declared, example, required) {
    // An optional parameter is {anyOf: [its schema, {type: "null"}]}: build its real input.
    let schema = declared;
    if (declared.anyOf) {
      const branch = declared.anyOf.find(function (b) { return b.type !== "null"; }) || {};
      schema = Object.assign({}, branch, { default: declared.default, description: declared.description });
    }
    const wrap = el("div", { class: "field" });
    const label = el("label", {}, name + (required ? "" : " (optional)") + " ");
    let input;
    const value = example !== undefined ? example : schema.default;
    if (schema.enum) {
      input = el("select", {});
      schema.enum.forEach(function (v) {
        const o = el("option", { value: v }, v);
        if (v === value) o.selected = true;
        input.appendChild(o);
      });
    } else if (schema.type === "boolean") {
      input = el("input", { type: "checkbox" });
      input.checked = Boolean(value);
    } else if (schema.type === "array") {
      input = el("input", { type: "text", placeholder: "e.g. 1,64,56,56", inputmode: "numeric" });
      if (Array.isArray(value)) input.value = value.join(",");
    } else {
      input = el("input", { type: "text", inputmode: "numeric" });
      if (value !== undefined && value !== null) input.value = String(value);
    }
    input.id = "param-" + name;
    input.dataset.param = name;
    input.dataset.kind = schema.enum ? "enum" : schema.type;
    label.appendChild(input);
    wrap.appendChild(label);
    const limits = [];
    if (schema.minimum !== undefined) limits.push("≥ " + schema.minimum);
    if (schema.maximum !== undefined) limits.push("≤ " + schema.maximum);
    if (schema.description) limits.push(schema.description);
    if (limits.length) wrap.appendChild(el("span", { class: "small" }, limits.join(", ")));
    wrap.appendChild(el("p", { class: "field-error", "data-field": "params." + name }));
    return wrap;
  }

  function showOperator() {
    const op = operators.find(function (o) { return o.name === $("operator").value; });
    const box = $("params");
    box.textContent = "";
    if (!op) return;
    $("operator-description").textContent = op.description;
    const schema = op.params_schema;
    const required = schema.required || [];
    const example = op.example.operator.params;
    Object.keys(schema.properties).forEach(function (name) {
      box.appendChild(field(name, schema.properties[name], example[name], required.includes(name)));
    });
    window.localStorage.setItem("tunehub.submit.operator", op.name);
  }

  function paramValue(input) {
    const raw = input.type === "checkbox" ? input.checked : input.value.trim();
    if (input.dataset.kind === "boolean") return raw;
    if (raw === "") return undefined;
    if (input.dataset.kind === "integer") return /^-?\d+$/.test(raw) ? Number(raw) : raw;
    if (input.dataset.kind === "array") {
      return raw.split(",").map(function (x) { x = x.trim(); return /^-?\d+$/.test(x) ? Number(x) : x; });
    }
    return raw;
  }

  function body() {
    const out = { target: $("target").value, space: $("space").value };
    const trials = $("trials").value.trim();
    out.trials = /^-?\d+$/.test(trials) ? Number(trials) : trials;
    if (tab === "tir") {
      out.tir = { format: "tvmscript", source: $("tir").value };
      return out;
    }
    const params = {};
    document.querySelectorAll("#params [data-param]").forEach(function (input) {
      const v = paramValue(input);
      if (v !== undefined) params[input.dataset.param] = v;
    });
    out.operator = { name: $("operator").value, params: params };
    return out;
  }

  function fieldOf(loc) {
    const path = loc.slice(loc[0] === "body" ? 1 : 0);
    if (path[0] === "operator" && path[1] === "params" && path.length > 2) return "params." + path[2];
    if (["trials", "target", "tir"].includes(path[0])) return path[0];
    return "_form";
  }

  function clearErrors() {
    document.querySelectorAll(".field-error").forEach(function (p) { p.textContent = ""; });
  }

  function showError(name, msg) {
    const target = document.querySelector('.field-error[data-field="' + name + '"]') || $("form-error");
    target.textContent = target.textContent ? target.textContent + "; " + msg : msg;
  }

  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    clearErrors();
    $("submit").disabled = true;
    const r = await tunehub.api("POST", "/api/v1/jobs", body());
    $("submit").disabled = false;
    if (r.status === 201) {
      window.location.assign("/jobs/" + r.data.id);
      return;
    }
    const detail = r.data && r.data.detail;
    if (Array.isArray(detail)) {
      detail.forEach(function (d) { showError(fieldOf(d.loc || []), d.msg); });
    } else {
      const loc = r.data && r.data.loc;
      showError(loc ? fieldOf(loc) : "_form", typeof detail === "string" ? detail : "submit failed (" + r.status + ")");
    }
  });

  document.querySelectorAll("#submit-tabs a").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      tab = a.dataset.tab;
      document.querySelectorAll("#submit-tabs a").forEach(function (b) { b.classList.toggle("active", b === a); });
      $("operator-fields").hidden = tab !== "operator";
      if ($("tir-fields")) $("tir-fields").hidden = tab !== "tir";
      clearErrors();
    });
  });

  Promise.all([tunehub.api("GET", "/api/v1/operators"), tunehub.api("GET", "/api/v1/targets")]).then(function (rs) {
    operators = rs[0].ok ? rs[0].data : [];
    const chosen = window.localStorage.getItem("tunehub.submit.operator") || "matmul";
    operators.forEach(function (op) {
      const o = el("option", { value: op.name }, op.name);
      if (op.name === chosen) o.selected = true;
      $("operator").appendChild(o);
    });
    $("operator").addEventListener("change", showOperator);
    showOperator();
    const targets = rs[1].ok ? rs[1].data : { host: { label: "host" }, targets: [] };
    $("target").appendChild(el("option", { value: "host" }, "host (" + targets.host.label + ")"));
    targets.targets.forEach(function (t) {
      if (t.label === targets.host.label) return;
      $("target").appendChild(el("option", { value: t.label }, t.label + (t.served ? "" : " (no live worker)")));
    });
    form.dataset.ready = "yes";
  });
})();
