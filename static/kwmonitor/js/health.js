/* What is alive, kept fresh: polls GET /status/ (the page embeds the first answer) and updates
 * the banner (worker or beat down), every element of a stream ([data-stream] with
 * [data-field=status|detail|pid|host|plan|input|last-op|processing]) and of a query
 * ([data-query] with [data-field=state|state-detail]). Liveness comes from heartbeats, so an
 * evaluator that stopped beating turns "unresponsive" here, and one whose heartbeat shows no
 * progress while input waits "stalled", although no event announces it; the processing figure
 * is blanked while the evaluator is not running (its last batch's rate is no longer true).
 */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("status-config").textContent);
  const banner = document.getElementById("health-banner");
  const bannerText = document.getElementById("health-banner-text");
  const NAMES = { worker: "The Celery worker", beat: "Celery beat" };

  function clock(seconds) {
    return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
  }

  function fields(container, name) {
    return container.querySelectorAll(`[data-field="${name}"]`);
  }

  function setText(container, name, text, title) {
    for (const el of fields(container, name)) {
      el.textContent = text;
      if (title !== undefined) el.title = title;
    }
  }

  function setBadge(container, name, value, title) {
    for (const el of fields(container, name)) {
      el.className = `badge ${value}`;
      el.textContent = value;
      el.title = title || "";
    }
  }

  function applyStream(s) {
    for (const box of document.querySelectorAll(`[data-stream="${s.stream}"]`)) {
      setBadge(box, "status", s.evaluator, s.detail);
      setText(box, "detail", s.detail);
      setText(box, "pid", s.pid === null ? "–" : String(s.pid));
      setText(box, "host", s.host || "–");
      setText(box, "plan", `v${s.plan_version}`);
      const lastOp = s.last_op_at === null ? "no op yet" : `last op ${clock(s.last_op_at)}`;
      for (const el of fields(box, "input")) {
        el.replaceChildren();
        if (s.idle) {
          const idle = document.createElement("span");
          idle.className = "idle";
          idle.textContent = "idle";
          const when = document.createElement("span");
          when.className = "sub";
          when.textContent = ` · ${lastOp}`;
          el.append(idle, when);
        } else {
          el.textContent = s.input_rate.toLocaleString(undefined, { maximumFractionDigits: 1 });
        }
        el.title = `ops ingested per second over the last ${s.rate_window} s; ${lastOp}`;
      }
      setText(box, "last-op", s.idle ? "" : lastOp);
      if (s.idle) setText(box, "processing", "–", "idle: no batch to process");
      else if (s.evaluator !== "running") setText(box, "processing", "–", `the evaluator is ${s.evaluator}: no batch is processed`);
    }
  }

  function applyQuery(q) {
    for (const box of document.querySelectorAll(`[data-query="${q.query}"]`)) {
      for (const el of fields(box, "state")) {
        el.className = `badge state-${q.state.replace(/ /g, "-")}`;
        el.textContent = q.state;
        el.title = q.detail;
      }
      for (const el of fields(box, "state-detail")) {
        el.textContent = q.detail;
        el.hidden = q.state === "evaluating";
      }
    }
  }

  function apply(report) {
    const down = report.components.filter((c) => !c.alive);
    banner.hidden = down.length === 0;
    bannerText.textContent = down.map((c) => `${NAMES[c.name]} is down: ${c.detail}.`).join(" ");
    report.streams.forEach(applyStream);
    report.queries.forEach(applyQuery);
  }

  function unreachable(text) {
    banner.hidden = false;
    bannerText.textContent = text;
  }

  let timer = null;
  async function refresh() {
    window.clearTimeout(timer);
    try {
      const response = await fetch(config.url + query(), {
        headers: { Accept: "application/json" }, credentials: "same-origin",
      });
      const body = await response.json();
      if (response.ok) apply(body);
      else unreachable(body.error || `status ${response.status}`);
    } catch (error) {
      unreachable(`the server does not answer (${error.message}); retrying`);
    } finally {
      timer = window.setTimeout(refresh, config.every_ms);
    }
  }

  function query() {
    const streams = config.report.streams.map((s) => s.stream);
    const queries = config.report.queries.map((q) => q.query);
    return `?streams=${streams.join(",")}&queries=${queries.join(",")}`;
  }

  apply(config.report);
  timer = window.setTimeout(refresh, config.every_ms);
  window.kw = Object.assign(window.kw || {}, { health: { refresh } });
})();
