/* Rolling time-series charts on uPlot (vendored in static/vendor/uplot). */
(function () {
  "use strict";

  const COLORS = ["#12a150", "#d33a3a", "#4f46e5", "#d98a00", "#0891b2", "#9333ea", "#db2777", "#65a30d"];

  function clockLabels(u, ticks) {
    return ticks.map((t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false }));
  }

  class TimeChart {
    /* series: [{label, color?, scale?}], axes: uPlot axes, windowSeconds: kept history,
       yRange: a fixed [min, max] of the y scale (default: fitted to the data). */
    constructor(el, series, { windowSeconds = 300, height = 220, axes = null, stepped = false, yRange = null } = {}) {
      this.el = el;
      el.kwChart = this; // the chart drawn in the element, for scripts that read its scales
      this.yRange = yRange;
      this.windowSeconds = windowSeconds;
      this.height = height;
      this.extraAxes = axes;
      this.stepped = stepped;
      this.x = [];
      this.ys = [];
      this.setSeries(series);
      new ResizeObserver(() => this.plot && this.plot.setSize({ width: this.width(), height: this.height })).observe(el);
    }

    width() {
      return Math.max(240, this.el.clientWidth);
    }

    setSeries(series) {
      this.series = series;
      while (this.ys.length < series.length) this.ys.push(this.x.map(() => null));
      if (this.plot) this.plot.destroy();
      const opts = {
        width: this.width(),
        height: this.height,
        legend: { live: false },
        cursor: { drag: { x: false, y: false } },
        scales: {
          // a rolling window ending now, never narrower than a minute (one point must not span years)
          x: { time: true, range: (u, min, max) => {
            const now = Date.now() / 1000;
            const hi = Math.max(max || now, now);
            return [Math.min(Math.max(min || hi, hi - this.windowSeconds), hi - 60), hi];
          } },
          ...(this.yRange ? { y: { range: () => this.yRange } } : {}),
        },
        series: [{}].concat(series.map((s, i) => ({
          label: s.label,
          stroke: s.color || COLORS[i % COLORS.length],
          width: 2,
          scale: s.scale || "y",
          fill: s.fill || undefined,
          points: { show: false },
          spanGaps: true,
        }))),
        axes: (this.extraAxes || [{}, { size: 48 }]).map((axis, i) => (i === 0 ? { values: clockLabels, space: 70, ...axis } : axis)),
      };
      this.plot = new uPlot(opts, this.data(), this.el);
    }

    data() {
      return [this.x].concat(this.ys.slice(0, this.series.length));
    }

    /* Add the point at time t (seconds); values[i] null or missing leaves series i unset.
       A point at the same time as the last one is merged into it. */
    push(t, values) {
      const last = this.x.length - 1;
      if (last >= 0 && this.x[last] === t) {
        values.forEach((v, i) => { if (v !== null && v !== undefined) this.ys[i][last] = v; });
      } else {
        this.x.push(t);
        this.ys.forEach((ys, i) => ys.push(values[i] === undefined ? null : values[i]));
      }
      const cutoff = t - this.windowSeconds;
      while (this.x.length && this.x[0] < cutoff) {
        this.x.shift();
        this.ys.forEach((ys) => ys.shift());
      }
    }

    /* Replace all points at once (x in seconds, one array per series). */
    setData(x, ys) {
      this.x = x;
      this.ys = ys;
      this.redraw();
    }

    redraw() {
      this.plot.setData(this.data());
    }
  }

  window.kw = Object.assign(window.kw || {}, { TimeChart, COLORS });
})();
