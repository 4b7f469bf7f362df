/* LiveFeed: one websocket feed of kwmonitor, kept alive across drops.
 *
 * It remembers the id of the last message it handed over (a snapshot's
 * last_id or a change's id) and reconnects with ?after=<that id>, with
 * exponential backoff and jitter, so the page sees every change once: no gap,
 * no duplicate. A message whose id is not after the last one is dropped
 * (defensive: the server already guarantees it). If the server answers a
 * resume with a snapshot, the page replaces its state with it.
 */
(function () {
  "use strict";

  function idParts(id) {
    const [ms, n] = String(id).split("-");
    return [Number(ms), Number(n || 0)];
  }

  function idAfter(a, b) {
    const [am, an] = idParts(a);
    const [bm, bn] = idParts(b);
    return am > bm || (am === bm && an > bn);
  }

  class LiveFeed {
    constructor(path, { after = null, onMessage, onState = () => {} }) {
      this.path = path;
      this.lastId = after;
      this.onMessage = onMessage;
      this.onState = onState;
      this.failures = 0;
      this.stopped = false;
      this.connect();
    }

    url() {
      const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
      const url = new URL(this.path, `${scheme}//${window.location.host}`);
      if (this.lastId !== null) url.searchParams.set("after", this.lastId);
      return url.toString();
    }

    connect() {
      this.onState("connecting");
      const ws = new WebSocket(this.url());
      this.ws = ws;
      ws.onopen = () => {
        this.failures = 0;
        this.onState("open");
      };
      ws.onmessage = (event) => {
        const message = JSON.parse(event.data);
        if (message.type === "snapshot") {
          this.lastId = message.last_id;
        } else if (message.id !== undefined) {
          if (this.lastId !== null && !idAfter(message.id, this.lastId)) return;
          this.lastId = message.id;
        }
        this.onMessage(message);
      };
      ws.onclose = () => {
        if (this.stopped) return;
        this.failures += 1;
        const delay = Math.min(15000, 500 * 2 ** (this.failures - 1)) * (0.8 + 0.4 * Math.random());
        this.onState("closed", delay);
        this.timer = window.setTimeout(() => this.connect(), delay);
      };
    }

    /* Drop the connection now (as a network failure would); it reconnects by itself. */
    drop() {
      if (this.ws) this.ws.close();
    }

    /* Close and stay closed, keeping the last id. */
    pause() {
      this.stopped = true;
      window.clearTimeout(this.timer);
      if (this.ws) this.ws.close();
      this.onState("paused");
    }

    /* Reconnect from the last id: the changes missed meanwhile arrive, in order. */
    resume() {
      if (!this.stopped) return;
      this.stopped = false;
      this.failures = 0;
      this.connect();
    }
  }

  /* Reflect a feed's state in a badge element. */
  function showFeedState(el) {
    return (state, delay) => {
      if (!el) return;
      el.className = `badge feed-state ${state}`;
      el.textContent = {
        open: "live",
        closed: `reconnecting in ${((delay || 0) / 1000).toFixed(1)} s`,
        paused: "paused",
      }[state] || "connecting";
    };
  }

  function idTime(id) {
    return idParts(id)[0] / 1000;
  }

  function formatTime(seconds) {
    return new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
  }

  window.kw = Object.assign(window.kw || {}, { LiveFeed, showFeedState, idTime, idAfter, formatTime });
})();
