/* Overview: each stream row follows its stream's events from the id the page was rendered at
   (processing rate, batch duration and rows; a batch's metrics also carry the live result count of
   every query it evaluated). Liveness and input rates come from health.js; a status event only
   makes it look again at once. */
(function () {
  "use strict";

  const feeds = JSON.parse(document.getElementById("overview-config").textContent);

  function fmt(n, digits) {
    return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits });
  }

  for (const { stream, after } of feeds) {
    const row = document.querySelector(`tr[data-stream="${stream}"]`);
    const cell = (field) => row.querySelector(`[data-field="${field}"]`);
    new kw.LiveFeed(`/ws/streams/${stream}/?replay=0`, {
      after,
      onMessage(e) {
        if (e.type === "evaluator.status") {
          kw.health.refresh();
        } else if (e.type === "batch.metrics") {
          cell("processing").textContent = fmt(e.rows_per_second, 1);
          cell("duration").textContent = `${fmt(e.duration_ms, 0)} ms`;
          cell("rows").textContent = fmt(e.input_rows, 0);
          for (const [query, state] of Object.entries(e.state)) {
            const live = document.querySelector(`tr[data-query="${query}"] [data-field="live"]`);
            if (live) live.textContent = fmt(state.live_results, 0);
          }
        }
      },
    });
  }
})();
