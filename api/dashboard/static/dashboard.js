// Refinery dashboard: polls GET /v1/dashboard every 2 s and renders the
// bandits. Charts arrive as SVG drawn by the server; this script only
// places them and fills in the numbers.
"use strict";

(function () {
  const every = 2000;
  const main = document.getElementById("bandits");
  const status = document.getElementById("status");
  const regret = document.getElementById("regret");
  const replicas = document.getElementById("replicas");

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    if (digits === undefined) digits = 1;
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  }
  function kpi(name, label, value) {
    return '<div class="kpi"><div class="v" data-field="' + name + '">' + value + '</div><div class="l">' + esc(label) + "</div></div>";
  }
  function shares(b) {
    return b.arms.map((a) => esc(a) + " " + num(100 * (b.arm_share[a] || 0), 0) + "%").join(" · ");
  }

  function card(b) {
    let h = '<h2>' + esc(b.name) + '<span class="policy">' + esc(b.policy) + " · arms " + esc(b.arms.join(", ")) + "</span></h2>";
    h += '<div class="kpis">';
    h += kpi("decisions", "decisions", num(b.decisions, 0));
    h += kpi("decisions_per_second", "decisions/s", num(b.decisions_per_second));
    h += kpi("avg_reward", "avg reward (last " + b.reward_window + ")", num(b.avg_reward, 2));
    h += kpi("regret", "cum. regret", b.regret ? num(b.regret.cumulative, 0) : "n/a");
    // Which panels and numbers a bandit has depends on its policy kind
    // (panelsFor in api/dashboard_view.go): uniform has no model and no
    // trainer, linear-ts no objective.
    const trained = b.panels.includes("lag");
    h += kpi("model_version", "model version", trained ? num(b.model_version, 0) : "n/a");
    h += kpi("trainer_lag", "trainer lag (rewards, s)", trained ? num(b.trainer_lag, 0) + " · " + num(b.trainer_lag_seconds, 1) + "s" : "n/a");
    h += "</div>";
    h += '<div class="bankline">rewards ' + num(b.rewards, 0) + " (" + num(b.rewards_per_second) + "/s) · " + ({ map: "MAP objective " + num(b.elbo, 1) + " · ", elbo: "ELBO " + num(b.elbo, 1) + " · " }[b.objective] || "") + "arm mix (10s) " + shares(b) + "</div>";
    if (b.bank) {
      const k = b.bank;
      h += '<div class="bankline" data-field="bank">bank depth ' + k.depth + "/" + k.capacity + " (in flight " + k.in_flight + ") · made " + num(k.produced, 0) + " (" + num(k.produced_per_second) + "/s) · used " + num(k.used, 0) + " (" + num(k.used_per_second) + "/s) · reused " + num(k.reused, 0) + " · discarded " + num(k.discarded, 0) + " · fall-backs " + num(k.fallbacks, 0) + " · beyond bounds " + num(k.beyond_bounds, 0) + " · per decision: sample uses " + num(k.mean_sample_uses) + ", age " + num(k.mean_sample_age_seconds) + " s, versions behind " + num(k.mean_versions_behind) + "</div>";
    }
    if (b.posterior) {
      // The posterior fitted at the MAP (laplace-ts, flow-ts, neural-linear).
      const p = b.posterior;
      let line = "posterior " + esc(p.kind);
      if (p.mean_sigma !== undefined) line += " · mean σ " + num(p.mean_sigma, 4);
      if (p.prior_precision !== undefined) line += " · last layer: prior precision " + num(p.prior_precision, 3) + " (marginal likelihood) · noise variance " + num(p.noise_variance, 3) + " · log evidence " + num(p.log_evidence, 1);
      if (p.flow_length) line += " · radial flow of " + p.flow_length + " layers, ELBO " + num(p.flow_elbo, 1);
      if (p.kind === "neural-linear") line += " · linear-ts posterior on the MAP's last hidden features";
      h += '<div class="bankline" data-field="posterior">' + line + "</div>";
    }
    h += '<div class="charts">';
    for (const c of b.panels) {
      if (b.charts[c]) h += '<div class="chart" data-chart="' + c + '">' + b.charts[c] + "</div>";
    }
    h += "</div>";
    h += "<table><thead><tr><th>time</th><th>arm</th><th>propensity</th><th>reward</th><th>sample</th><th>v</th><th>context</th></tr></thead><tbody>";
    for (const d of b.recent) {
      const t = new Date(d.created_at).toLocaleTimeString("en-GB");
      h += "<tr><td>" + esc(t) + "</td><td>" + esc(d.arm) + "</td><td>" + num(d.propensity, 3) + "</td><td>" + (d.reward === null ? "pending" : num(d.reward, 2)) +
        "</td><td>" + esc(d.sample) + "</td><td>" + d.model_version + '</td><td class="ctx" title="' + esc(JSON.stringify(d.context)) + '">' + esc(JSON.stringify(d.context)) + "</td></tr>";
    }
    h += "</tbody></table>";
    return h;
  }

  // fleet is the table of the replicas sharing the database: where each
  // listens, which bandits it trains, and when it was last seen.
  function fleet(v) {
    const now = new Date(v.generated_at);
    let h = "<h2>Replicas</h2><table><thead><tr><th>address</th><th>id</th><th>trains</th><th>last seen</th><th>started</th></tr></thead><tbody>";
    for (const r of v.replicas) {
      const ago = Math.max(0, (now - new Date(r.last_seen)) / 1000);
      h += '<tr data-replica="' + esc(r.id) + '"' + (r.this ? ' class="this"' : "") + "><td>" + esc(r.address) + (r.this ? " (this one)" : "") +
        "</td><td>" + esc(r.id) + "</td><td>" + (r.trains.length ? esc(r.trains.join(", ")) : "none") +
        "</td><td>" + num(ago, 1) + " s ago</td><td>" + esc(new Date(r.started_at).toLocaleTimeString("en-GB")) + "</td></tr>";
    }
    return h + "</tbody></table>";
  }

  function render(v) {
    if (v.regret_chart) {
      regret.innerHTML = v.regret_chart;
      regret.hidden = false;
    }
    if (v.replicas) {
      replicas.innerHTML = fleet(v);
      replicas.hidden = false;
    }
    if (v.bandits.length === 0) return;
    const seen = new Set();
    for (const b of v.bandits) {
      seen.add(b.name);
      let el = main.querySelector('.card[data-bandit="' + CSS.escape(b.name) + '"]');
      if (!el) {
        const empty = main.querySelector(".empty");
        if (empty) empty.remove();
        el = document.createElement("section");
        el.className = "card";
        el.dataset.bandit = b.name;
        main.appendChild(el);
      }
      el.innerHTML = card(b);
    }
    for (const el of main.querySelectorAll(".card")) {
      if (!seen.has(el.dataset.bandit)) el.remove();
    }
  }

  async function poll() {
    try {
      const resp = await fetch("/v1/dashboard", { headers: { Accept: "application/json" }, cache: "no-store" });
      // The sign-in expired or its key was revoked: the page itself
      // is then the login form.
      if (resp.status === 401 || resp.status === 403) { location.reload(); return; }
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      const v = await resp.json();
      render(v);
      status.textContent = "updated " + new Date(v.generated_at).toLocaleTimeString("en-GB");
      status.classList.remove("err");
      document.body.dataset.updated = v.generated_at;
    } catch (e) {
      // Not console.error: a server restart is not a page bug.
      status.textContent = "no data: " + e.message;
      status.classList.add("err");
    }
    setTimeout(poll, every);
  }
  poll();
})();
