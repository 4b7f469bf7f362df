/* Aggregate tiles: the latest value of each aggregate subscription on the page and a sparkline of its
   recent windows, fed by the stream feed's "aggregate.value" payloads (window_end is event time). */
(function () {
  "use strict";

  const KEEP = 60;

  class AggregateTiles {
    constructor(root) {
      this.tiles = new Map();
      root.querySelectorAll("[data-aggregate]").forEach((el) => {
        this.tiles.set(Number(el.dataset.aggregate), { el, x: [], y: [], plot: null });
      });
    }

    has(id) {
      return this.tiles.has(id);
    }

    /* One window value: {aggregate, window_end, value, seq}. */
    push(e) {
      const tile = this.tiles.get(e.aggregate);
      if (!tile) return;
      const value = e.value === null ? "–" : Number(e.value).toLocaleString(undefined, { maximumFractionDigits: 3 });
      tile.el.querySelector('[data-field="value"]').textContent = value;
      tile.el.querySelector('[data-field="window-end"]').textContent = `window ending at ${e.window_end} (op ${e.seq})`;
      if (tile.x.length && tile.x[tile.x.length - 1] >= e.window_end) return;
      tile.x.push(e.window_end);
      tile.y.push(e.value);
      if (tile.x.length > KEEP) {
        tile.x.shift();
        tile.y.shift();
      }
      this.draw(tile);
    }

    draw(tile) {
      const el = tile.el.querySelector('[data-field="chart"]');
      if (!tile.plot) {
        tile.plot = new uPlot({
          width: Math.max(160, el.clientWidth), height: 60, legend: { show: false }, cursor: { show: false },
          scales: { x: { time: false } },
          axes: [{ show: false }, { show: false }],
          series: [{}, { stroke: "#4f46e5", width: 2, fill: "rgba(79,70,229,0.08)", points: { show: false }, spanGaps: true }],
        }, [tile.x, tile.y], el);
      } else {
        tile.plot.setData([tile.x, tile.y]);
      }
    }
  }

  window.kw = Object.assign(window.kw || {}, { AggregateTiles });
})();
