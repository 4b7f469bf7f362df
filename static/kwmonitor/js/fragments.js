/* Server-rendered fragments kept fresh: every element with data-fragment-url gets a new rendering of that URL
   every data-every milliseconds (the Sharing page's classes, a stream's source panel, a query's sharing note). */
(function () {
  "use strict";

  function follow(holder) {
    const every = Number(holder.dataset.every) || 5000;

    async function refresh() {
      try {
        const response = await fetch(holder.dataset.fragmentUrl,
                                     { credentials: "same-origin", headers: { Accept: "text/html" } });
        if (response.ok) {
          const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
          holder.replaceChildren(...fresh.body.childNodes);
        }
      } finally {
        window.setTimeout(refresh, every);
      }
    }

    window.setTimeout(refresh, every);
  }

  document.querySelectorAll("[data-fragment-url]").forEach(follow);
})();
