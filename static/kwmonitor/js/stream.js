/* Stream dashboard: processing rate, dead letters, dropping ratios, rearrangements from the stream's
   feed. The evaluator's liveness and the input rate come from health.js (heartbeats); a status event
   only makes it look again at once. Raw dead-letter lines are shown when the page says so (staff). */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("stream-config").textContent);
  const MAX_ROWS = 100;
  const $ = (id) => document.getElementById(id);

  const throughput = new kw.TimeChart($("throughput-chart"), [
    { label: "rows/s of batch time", color: "#4f46e5", fill: "rgba(79,70,229,0.08)" },
    { label: "batch ms", color: "#d98a00", scale: "ms" },
  ], {
    windowSeconds: 1800,
    axes: [{}, { scale: "y", size: 52 }, { scale: "ms", side: 1, size: 52, grid: { show: false } }],
  });

  const relations = [];
  // Ratios are shares (0 to 1): a fixed scale, labelled in percent (an all-zero series must not read 0-100).
  const percent = (u, ticks) => ticks.map((t) => `${Math.round(t * 100)} %`);
  const dropping = new kw.TimeChart($("dropping-chart"), [], {
    windowSeconds: 1800,
    yRange: [0, 1],
    axes: [{}, { size: 52, values: percent }],
  });

  let redrawPending = false;
  function redrawSoon() {
    if (redrawPending) return;
    redrawPending = true;
    window.requestAnimationFrame(() => {
      redrawPending = false;
      throughput.redraw();
      dropping.redraw();
    });
  }

  function fmt(n, digits = 1) {
    return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits });
  }

  function keepAtMost(list, n) {
    while (list.children.length > n) list.lastElementChild.remove();
  }

  // Per relation: its current order and how many of the monitor's checks kept it since it last changed.
  const orders = new Map();
  function orderChecked(relation, sequence, kept, t) {
    let entry = orders.get(relation);
    if (!entry) {
      const li = $("order-check-template").content.firstElementChild.cloneNode(true);
      li.querySelector(".relation").textContent = relation;
      $("order-checks").append(li);
      entry = { li, kept: 0 };
      orders.set(relation, entry);
    }
    entry.kept = kept ? entry.kept + 1 : 0;
    entry.li.querySelector(".seq").textContent = sequence;
    entry.li.querySelector(".checks").textContent = kept
      ? `· kept by ${entry.kept} check${entry.kept === 1 ? "" : "s"}, the last at ${kw.formatTime(t)}`
      : `· set at ${kw.formatTime(t)}`;
  }

  let dead = 0;
  const aggregates = new kw.AggregateTiles(document);

  const handlers = {
    "aggregate.value"(e) {
      aggregates.push(e);
    },
    "evaluator.status"() {
      kw.health.refresh();
    },
    "batch.metrics"(e, t) {
      throughput.push(t, [e.rows_per_second, e.duration_ms]);
      $("stat-processing").textContent = fmt(e.rows_per_second);
      $("stat-duration").textContent = `${fmt(e.duration_ms, 0)} ms`;
      $("stat-rows").textContent = fmt(e.input_rows, 0);
    },
    deadletter(e, t) {
      dead += 1;
      $("stat-dead").textContent = dead;
      const row = $("dead-letter-template").content.firstElementChild.cloneNode(true);
      row.querySelector(".when").textContent = kw.formatTime(t);
      row.querySelector(".seqno").textContent = e.seq === null ? "–" : e.seq;
      row.querySelector(".reason").textContent = e.reason;
      const line = row.querySelector(".line");
      if (line && e.line !== null) {
        line.textContent = e.line;
        line.title = e.line;
      }
      $("dead-letters").prepend(row);
      keepAtMost($("dead-letters"), MAX_ROWS);
      $("dead-empty").hidden = true;
    },
    "asc.dropping"(e, t) {
      let index = relations.indexOf(e.relation);
      if (index < 0) {
        relations.push(e.relation);
        index = relations.length - 1;
        dropping.setSeries(relations.map((r) => ({ label: r })));
      }
      const values = relations.map((_, i) => (i === index ? e.ratio : null));
      dropping.push(t, values);
      $("dropping-empty").hidden = true;
    },
    "asc.rearrangement"(e, t) {
      const before = e.old_sequence.join(" › ");
      const after = e.new_sequence.join(" › ");
      orderChecked(e.relation, after, before === after, t);
      if (before === after) return; // the monitor re-derived the same order: not a change
      const li = $("rearrangement-template").content.firstElementChild.cloneNode(true);
      li.querySelector(".when").textContent = kw.formatTime(t);
      li.querySelector(".relation").textContent = e.relation;
      li.querySelector(".numbers").textContent = `d_init ${fmt(e.d_init, 3)} · d_cur ${fmt(e.d_cur, 3)} · μ ${fmt(e.mu, 3)}`;
      li.querySelector(".old").textContent = before;
      li.querySelector(".new").textContent = after;
      $("rearrangements").prepend(li);
      keepAtMost($("rearrangements"), MAX_ROWS);
      $("rearr-empty").hidden = true;
    },
  };

  new kw.LiveFeed(config.feed, {
    onState: kw.showFeedState($("feed-state")),
    onMessage(message) {
      const handler = handlers[message.type];
      if (handler) {
        handler(message, kw.idTime(message.id));
        redrawSoon();
      }
    },
  });
})();
