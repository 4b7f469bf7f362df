/* Sharing page: swap in a fresh server rendering of the streams' sharing classes every few seconds. */
(function () {
  "use strict";

  const holder = document.getElementById("sharing-streams");
  const every = Number(holder.dataset.every) || 5000;

  async function refresh() {
    try {
      const response = await fetch(holder.dataset.url, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (response.ok) {
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        holder.replaceChildren(...fresh.body.childNodes);
      }
    } finally {
      window.setTimeout(refresh, every);
    }
  }

  window.setTimeout(refresh, every);
})();
