// DRA control-plane metrics page: the figures arrive as Prometheus answers their queries.
//
// The page shows the figures finished when it rendered; the others say "waiting". While any waits,
// this asks the page again for ?fragment=figures&seen=N, which the server answers as soon as more
// than N figures are finished (or after a few seconds), and puts the answer in place of the figures.
// The server bounds the whole run by its deadline, so this ends; a failed fetch is tried again later.
(function () {
  "use strict";
  var RETRY_MS = 3000, MAX_FAILURES = 5, failures = 0;

  function current() { return document.querySelector("[data-dra-figures]"); }

  function next() {
    var el = current();
    if (!el || el.getAttribute("data-pending") === "0") return;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "figures");
    url.searchParams.set("seen", el.getAttribute("data-done") || "0");
    fetch(url.toString(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        failures = 0;
        var holder = document.createElement("template");
        holder.innerHTML = html.trim();
        var fresh = holder.content.querySelector("[data-dra-figures]");
        var el = current();
        if (fresh && el) el.replaceWith(fresh);
        next();
      })
      .catch(function () {
        if (++failures < MAX_FAILURES) window.setTimeout(next, RETRY_MS);
      });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", next);
  else next();
})();
