/* WXQuery subscription page: its result items from the subscription's feed, newest first.
   Items are XML text shown as text (never parsed into the page). */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("subscription-config").textContent);
  const MAX_ITEMS = 200;
  const $ = (id) => document.getElementById(id);
  const list = $("results");
  const template = $("result-template");
  let count = 0;

  function add(result) {
    const node = template.content.firstElementChild.cloneNode(true);
    node.querySelector(".when").textContent = kw.formatTime(result.ts);
    node.querySelector(".seq").textContent = `seq ${result.seq}`;
    node.querySelector(".item").textContent = result.item;
    list.prepend(node);
    while (list.children.length > MAX_ITEMS) list.lastElementChild.remove();
    count += 1;
    $("count-results").textContent = count.toLocaleString();
    $("last-seq").textContent = result.seq;
    $("results-empty").hidden = true;
  }

  new kw.LiveFeed(config.feed, {
    onMessage(message) {
      if (message.type === "subscription.result") add(message);
    },
    onState: kw.showFeedState($("feed-state")),
  });
})();
