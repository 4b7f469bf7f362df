/* Query dashboard: the live set of MTJNTs, counters, the rate chart, and the query's configuration,
   which follows admin edits (query.updated entries on the feed; a snapshot carries the latest). */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("query-config").textContent);
  const RENDER_LIMIT = 300;
  const NEW_VISIBLE_MS = 8000;
  const REMOVED_VISIBLE_MS = 2500;
  const FADE_MS = 1200;

  const container = document.getElementById("results");
  const resultTemplate = document.getElementById("result-template");
  const tupleTemplate = document.getElementById("tuple-template");
  const counters = {
    live: document.getElementById("count-live"),
    adds: document.getElementById("count-adds"),
    removes: document.getElementById("count-removes"),
    changes: document.getElementById("count-changes"),
    seq: document.getElementById("last-seq"),
  };
  const results = new Map(); // result key -> {el}
  let adds = 0;
  let removes = 0;
  let changes = Number(counters.changes.textContent) || 0;

  /* ---- drawing one result as a tree of tuples ---- */

  function relationColor(name) {
    let h = 0;
    for (const ch of name) h = (h * 31 + ch.codePointAt(0)) % 360;
    return `hsl(${h}, 58%, 40%)`;
  }

  const TOKEN = /[\p{L}\p{N}]+/gu;

  function highlighted(text, hits) {
    const frag = document.createDocumentFragment();
    let at = 0;
    for (const m of text.matchAll(TOKEN)) {
      if (!hits.has(m[0].toLowerCase())) continue;
      frag.append(text.slice(at, m.index));
      const mark = document.createElement("mark");
      mark.className = "hit";
      mark.textContent = m[0];
      frag.append(mark);
      at = m.index + m[0].length;
    }
    frag.append(text.slice(at));
    return frag;
  }

  function tupleItem(t, edgeLabel) {
    const li = tupleTemplate.content.firstElementChild.cloneNode(true);
    const hits = new Set((t.hits || []).map((h) => h.toLowerCase()));
    li.querySelector(".rel").textContent = t.relation;
    li.querySelector(".tuple-head").style.setProperty("--rel-color", relationColor(t.relation));
    li.querySelector(".key").textContent = `#${typeof t.key === "string" ? t.key : JSON.stringify(t.key)}`;
    const attrs = li.querySelector(".attrs");
    for (const [name, value] of Object.entries(t.values || {})) {
      const span = document.createElement("span");
      const label = document.createElement("span");
      label.className = "name";
      label.textContent = `${name}: `;
      span.append(label);
      if (typeof value === "string") span.append(highlighted(value, hits));
      else span.append(value === null ? "∅" : String(value));
      attrs.append(span);
    }
    if (edgeLabel) {
      const edge = li.querySelector(".edge");
      edge.textContent = edgeLabel;
      edge.hidden = false;
    }
    return li;
  }

  function tupleId(relation, key) {
    return `${relation}\u0000${JSON.stringify(key)}`;
  }

  function resultCard(result, seq) {
    const card = resultTemplate.content.firstElementChild.cloneNode(true);
    const byId = new Map(result.tuples.map((t) => [tupleId(t.relation, t.key), t]));
    const links = new Map([...byId.keys()].map((id) => [id, []]));
    for (const [[hr, hk], [tr, tk], fk] of result.edges) {
      const holder = tupleId(hr, hk);
      const target = tupleId(tr, tk);
      links.get(holder).push({ other: target, label: `${hr}.${fk} → ${tr}` });
      links.get(target).push({ other: holder, label: `${hr}.${fk} → ${tr}` });
    }
    // root: the tuple with the most joins (ties: the first), so the tree is shallow
    let root = result.tuples.length ? tupleId(result.tuples[0].relation, result.tuples[0].key) : null;
    for (const [id, around] of links) if (around.length > links.get(root).length) root = id;
    const seen = new Set();
    function grow(id, label) {
      seen.add(id);
      const li = tupleItem(byId.get(id), label);
      const children = links.get(id).filter((l) => !seen.has(l.other));
      if (children.length) {
        const ul = document.createElement("ul");
        for (const l of children) if (!seen.has(l.other)) ul.append(grow(l.other, l.label));
        li.append(ul);
      }
      return li;
    }
    if (root !== null) card.querySelector(".tree").append(grow(root, null));
    card.querySelector(".result-size").textContent = `${result.tuples.length} tuple${result.tuples.length === 1 ? "" : "s"}`;
    card.querySelector(".result-seq").textContent = seq === null ? "" : `op ${seq}`;
    card.dataset.key = result.key;
    return card;
  }

  /* ---- applying the feed ---- */

  function refreshCounters() {
    counters.live.textContent = results.size;
    counters.adds.textContent = adds;
    counters.removes.textContent = removes;
    counters.changes.textContent = changes;
    const rendered = container.querySelectorAll(".result:not(.is-removed)").length;
    document.getElementById("results-empty").hidden = results.size > 0 || container.children.length > 0;
    const more = document.getElementById("results-more");
    more.hidden = results.size <= rendered;
    more.textContent = `${results.size - rendered} more live results are not drawn (showing ${rendered}).`;
  }

  function renderedCount() {
    return container.querySelectorAll(".result:not(.is-removed)").length;
  }

  function applySnapshot(snapshot) {
    results.clear();
    container.replaceChildren();
    for (const result of snapshot.results) {
      const el = results.size < RENDER_LIMIT ? resultCard(result, null) : null;
      if (el) container.append(el);
      results.set(result.key, { el });
    }
  }

  function applyAdd(change) {
    if (results.has(change.result.key)) return;
    const el = renderedCount() < RENDER_LIMIT ? resultCard(change.result, change.seq) : null;
    if (el) {
      el.classList.add("is-new");
      container.prepend(el);
      window.setTimeout(() => el.classList.remove("is-new"), NEW_VISIBLE_MS);
    }
    results.set(change.result.key, { el });
  }

  function applyRemove(change) {
    const entry = results.get(change.result.key);
    if (!entry) return;
    results.delete(change.result.key);
    const el = entry.el;
    if (!el) return;
    el.classList.remove("is-new");
    el.classList.add("is-removed");
    el.querySelector(".result-seq").textContent = `removed at op ${change.seq}`;
    window.setTimeout(() => el.classList.add("is-fading"), REMOVED_VISIBLE_MS);
    window.setTimeout(() => { el.remove(); refreshCounters(); }, REMOVED_VISIBLE_MS + FADE_MS);
  }

  /* ---- the query's configuration (name, keywords, Tmax, window, predicates) ---- */

  function chip(text, className) {
    const span = document.createElement("span");
    span.className = className;
    span.textContent = text;
    return span;
  }

  function applyConfig(c) {
    document.getElementById("query-name").textContent = c.name;
    document.title = `${c.name} · kwmonitor`;
    document.getElementById("query-keywords").replaceChildren(
      ...(c.keywords.length ? c.keywords.map((k) => chip(k, "chip")) : [chip("filter subscription", "chip")]));
    document.getElementById("query-tmax-item").hidden = c.keywords.length === 0;
    document.getElementById("query-tmax").textContent = c.tmax;
    document.getElementById("query-window").textContent = c.window_seconds ? `${c.window_seconds} s` : "unbounded";
    document.getElementById("query-predicates").replaceChildren(...c.predicates.map((p) => chip(p, "mono predicate")));
    document.getElementById("predicate-note").hidden = c.predicates.length === 0;
  }

  /* ---- rate chart: adds and removes per second ---- */

  const buckets = new Map(config.rates.map(([sec, a, r]) => [sec, [a, r]]));
  const chart = new kw.TimeChart(document.getElementById("rate-chart"), [
    { label: "adds/s", color: "#12a150", fill: "rgba(18,161,80,0.08)" },
    { label: "removes/s", color: "#d33a3a", fill: "rgba(211,58,58,0.06)" },
  ], { windowSeconds: config.window, height: 200 });

  function count(id, index) {
    const sec = Math.floor(kw.idTime(id));
    const bucket = buckets.get(sec) || [0, 0];
    bucket[index] += 1;
    buckets.set(sec, bucket);
  }

  function drawRates() {
    const now = Math.floor(Date.now() / 1000);
    const x = [], a = [], r = [];
    for (let sec = now - config.window; sec <= now; sec++) {
      const bucket = buckets.get(sec) || [0, 0];
      x.push(sec);
      a.push(bucket[0]);
      r.push(bucket[1]);
    }
    for (const sec of buckets.keys()) if (sec < now - config.window) buckets.delete(sec);
    chart.setData(x, [a, r]);
  }
  drawRates();
  window.setInterval(drawRates, 1000);

  /* ---- the feed ---- */

  const feed = new kw.LiveFeed(config.feed, {
    onState: kw.showFeedState(document.getElementById("feed-state")),
    onMessage(message) {
      if (message.type === "snapshot") {
        applySnapshot(message);
        if (message.config) applyConfig(message.config);
        counters.seq.textContent = message.last_seq === null ? "–" : message.last_seq;
      } else if (message.type === "query.updated") {
        changes += 1;
        applyConfig(message.config);
        kw.health.refresh();
      } else if (message.type === "result.add") {
        adds += 1;
        changes += 1;
        count(message.id, 0);
        applyAdd(message);
        counters.seq.textContent = message.seq;
      } else if (message.type === "result.remove") {
        removes += 1;
        changes += 1;
        count(message.id, 1);
        applyRemove(message);
        counters.seq.textContent = message.seq;
      }
      refreshCounters();
    },
  });
  const toggle = document.getElementById("feed-toggle");
  toggle.addEventListener("click", () => {
    if (feed.stopped) feed.resume();
    else feed.pause();
    toggle.textContent = feed.stopped ? "Resume" : "Pause";
  });
  window.kwQueryFeed = feed; // for operators poking at the page from the console
  // aggregate subscriptions over this query's results: their values come on the stream's feed
  if (config.stream_feed) {
    const tiles = new kw.AggregateTiles(document);
    new kw.LiveFeed(config.stream_feed, {
      onMessage(message) {
        if (message.type === "aggregate.value") tiles.push(message);
      },
    });
  }
})();
