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
  function kpi(name, label, value, title) {
    return '<div class="kpi"' + (title ? ' title="' + esc(title) + '"' : "") + '><div class="v" data-field="' + name + '">' + value + '</div><div class="l" data-field="' + name + '-label">' + esc(label) + "</div></div>";
  }
  function shares(b) {
    return b.arms.map((a) => esc(a) + " " + num(100 * (b.arm_share[a] || 0), 0) + "%").join(" · ");
  }

  // fig shows a health figure to four significant digits.
  function fig(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    return Number(v).toPrecision(4);
  }
  function field(name, text) {
    return '<span data-field="' + esc(name) + '">' + text + "</span>";
  }

  // health is the card's posterior health panel (status.health, issue
  // 28): the spread per layer against the prior's, the noise against the
  // rewards' variance, the held-out figures and the lock-in alarm.
  function health(b) {
    const hl = b.health;
    if (!hl) return "";
    let h = '<div class="health" data-field="health">';
    const l = hl.lock_in;
    if (l.alarm) {
      const others = Object.entries(l.best_probability || {}).filter((e) => e[0] !== l.top_arm).sort((x, y) => y[1] - x[1]);
      h += '<div class="alarm" data-field="lockin-alarm" role="alert">Lock-in: ' + esc(l.top_arm) + " took " + num(100 * l.top_share, 1) + "% of the last " + l.decisions +
        " decisions while the posterior gives " + others.filter((e) => e[1] > 0.05).map((e) => esc(e[0]) + " a probability of being best of " + fig(e[1])).join(", ") + "</div>";
    }
    if (hl.layers) {
      h += "<div>posterior σ per layer (median · share at ≥ 0.9 of the prior's): " + hl.layers.map((y) =>
        (y.layer === hl.layers.length ? "out" : "layer " + y.layer) + " " + (y.point_estimate ? field("point-estimate-" + y.layer, "point estimate") :
          field("sigma-median-" + y.layer, fig(y.median_sigma)) + " · " + field("at-prior-" + y.layer, num(100 * y.at_prior_share, 1)) + "%")).join("; ") + "</div>";
    }
    if (hl.noise) {
      if (hl.noise.likelihood === "bernoulli") {
        h += '<div data-field="noise">noise: none (Bernoulli likelihood, p(y=1) = sigmoid(f))</div>';
      } else {
        h += "<div>noise variance vs the rewards' (reward units²): " + (hl.noise.variances || []).map((v) => {
          const k = v.arm ? "-" + v.arm : "";
          return (v.arm ? esc(v.arm) + " " : "") + field("noise-variance" + k, fig(v.noise_variance)) + " vs " + field("reward-variance" + k, fig(v.reward_variance)) + " (" + num(v.rewards, 0) + " rewards)";
        }).join("; ") + "</div>";
      }
    }
    const o = hl.heldout;
    if (o) {
      let line = "held out, before training (v" + o.scored_by + ", " + o.draws + (o.draws === 1 ? " draw, the MAP" : " draws") + "): " + o.rewards + " newest: log-lik/reward " + field("heldout-loglik", fig(o.log_lik_per_reward));
      if (o.calibration_error !== undefined) line += " · ECE " + field("calibration-error", fig(o.calibration_error));
      line += " · last " + o.recent_rewards + ": " + field("recent-loglik", fig(o.recent_log_lik_per_reward));
      if (o.recent_calibration_error !== undefined) line += " · ECE " + field("recent-calibration-error", fig(o.recent_calibration_error));
      h += "<div>" + line + "</div>";
    } else if (hl.noise) {
      h += '<div data-field="heldout-none">held out: no version scored yet</div>';
    }
    let lock = "lock-in check: ";
    if (l.decisions === 0) {
      lock += "no decisions yet";
    } else {
      lock += esc(l.top_arm) + " took " + field("lockin-top-share", num(100 * l.top_share, 1)) + "% of the last " + field("lockin-decisions", l.decisions) + " decisions";
      if (l.best_probability) lock += " · P(best) " + Object.entries(l.best_probability).map((e) => esc(e[0]) + " " + field("best-probability-" + e[0], fig(e[1]))).join(", ");
      lock += l.alarm ? " · ALARM" : " · no alarm";
    }
    h += "<div>" + lock + "</div>";
    return h + "</div>";
  }

  function card(b) {
    let h = '<h2>' + esc(b.name) + '<span class="policy">' + esc(b.policy) + " · arms " + esc(b.arms.join(", ")) + "</span>" +
      (b.health && b.health.lock_in.alarm ? '<span class="badge" data-field="lockin-badge" title="lock-in alarm: see the health panel">lock-in</span>' : "") + "</h2>";
    h += '<div class="kpis">';
    h += kpi("decisions", "decisions", num(b.decisions, 0));
    h += kpi("decisions_per_second", "decisions/s", num(b.decisions_per_second));
    h += kpi("avg_reward", "avg reward (last " + b.reward_window + " rewards)", b.avg_reward === null ? "none yet" : num(b.avg_reward, 2));
    // Only a simulator knows the regret: no card for other traffic.
    if (b.regret) h += kpi("regret", "cum. regret", num(b.regret.cumulative, 0));
    // Which panels and numbers a bandit has depends on its policy kind
    // (panelsFor in api/dashboard_view.go): uniform has no model and no
    // trainer, linear-ts no objective.
    const trained = b.panels.includes("lag");
    h += kpi("model_version", "model version", trained ? num(b.model_version, 0) : "n/a");
    // The lag swings between 0 and a retraining's batch within a
    // second: the card shows the mean the chart draws, and how long the
    // posterior was trained before the newest reward. A replica that
    // does not train the bandit serves the versions the trainer persists
    // (every snapshot_every): its lag is behind the newest of those, not
    // the trainer's own.
    const lag = trained ? num(b.trainer_lag_mean, 1) + " · " + num(b.trainer_lag_seconds, 1) + "s" : "n/a";
    if (!trained || b.trainer) {
      h += kpi("trainer_lag", "trainer lag (rewards, s)", lag,
        "The rewards the published posterior has not seen (mean of the recent samples), and how long before the newest reward it was trained.");
    } else {
      h += kpi("trainer_lag", "lag, following (rewards, s)", lag,
        "Another replica trains this bandit; this one serves the newest version it persisted (every " + b.snapshot_every +
        " versions), so it lags by the rewards since then. The trainer's own lag is on its replica's dashboard.");
    }
    h += "</div>";
    h += '<div class="bankline">rewards ' + num(b.rewards, 0) + " (" + num(b.rewards_per_second) + "/s) · " + ({ map: "MAP objective per reward " + field("elbo-per-reward", fig(b.elbo_per_reward)) + " · ", elbo: "ELBO per reward " + field("elbo-per-reward", fig(b.elbo_per_reward)) + " · " }[b.objective] || "") + "arm mix (10s) " + shares(b) + "</div>";
    if (b.bank) {
      const k = b.bank;
      h += '<div class="bankline" data-field="bank">bank depth ' + k.depth + "/" + k.capacity + " (in flight " + k.in_flight + ") · made " + num(k.produced, 0) + " (" + num(k.produced_per_second) + "/s) · used " + num(k.used, 0) + " (" + num(k.used_per_second) + "/s) · reused " + num(k.reused, 0) + " · discarded " + num(k.discarded, 0) + " · fall-backs " + num(k.fallbacks, 0) + " · beyond bounds " + num(k.beyond_bounds, 0) + " · per decision: sample uses " + num(k.mean_sample_uses) + ", age " + num(k.mean_sample_age_seconds) + " s, versions behind " + num(k.mean_versions_behind) + "</div>";
    }
    if (b.shadow) {
      // The candidate (shadow) and its off-policy estimate (SNIPS) against
      // the live policy, over the newest logged decisions.
      const e = b.shadow.estimate;
      let line = "shadow " + esc(b.shadow.policy);
      const iv = (v) => num(v.value, 3) + " [" + num(v.lo, 3) + ", " + num(v.hi, 3) + "]";
      if (e && e.candidate && e.live) {
        line += " · " + esc(e.estimator) + " over " + num(e.decisions, 0) + " decisions: candidate " + field("shadow-candidate", iv(e.candidate)) +
          " vs live " + field("shadow-live", iv(e.live)) + " (" + num(100 * e.level, 0) + "%) · ESS " + num(e.ess, 0);
      } else if (e) {
        line += " · no estimate: " + esc(e.reason || "");
      }
      h += '<div class="bankline" data-field="shadow">' + line + "</div>";
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
    h += health(b);
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
    if (v.bandits.length === 0) {
      // The first answer, or the last bandit deleted: now it is known.
      main.innerHTML = '<p class="empty">No bandits yet: create one with <code>POST /v1/bandits</code>, or start with <code>refinery serve --simulate mushroom</code>.</p>';
      return;
    }
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
