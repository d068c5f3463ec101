// Live updates for gpudash pages: one websocket per page, region refresh by fragment.
//
// The page declares its scope in <body data-live-scope='{"cluster":1,"kind":["ResourceClaim"]}'>
// and its refreshable parts as elements with data-region="name". When the server reports a change
// in scope, each region is re-fetched from the same URL (same filters) with ?fragment=name and
// swapped in place. Reconnects with backoff; after a reconnect every region is re-fetched so a
// client never keeps a gap.
(function () {
  "use strict";
  var scopeText = document.body.getAttribute("data-live-scope");
  var scope = null;
  try { scope = JSON.parse(scopeText); } catch (e) { scope = null; }
  var indicator = document.getElementById("live");
  var state = { status: "off", refreshes: 0, messages: 0, connects: 0 };
  window.gpudashLive = state;
  if (!scope || !indicator) return;

  var backoff = 500, maxBackoff = 10000, socket = null, pending = null, inFlight = {}, again = {};

  function setStatus(status, text) {
    state.status = status;
    document.body.setAttribute("data-live", status);
    indicator.className = "live live-" + status;
    indicator.querySelector(".live-text").textContent = text;
  }

  function regionUrl(name) {
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", name);
    return url.toString();
  }

  function refresh(name) {
    var el = document.querySelector('[data-region="' + name + '"]');
    if (!el) return;
    if (inFlight[name]) { again[name] = true; return; }
    inFlight[name] = true;
    fetch(regionUrl(name), { credentials: "same-origin", headers: { "X-Requested-With": "gpudash-live" } })
      .then(function (resp) {
        if (resp.redirected && resp.url.indexOf("/accounts/login") !== -1) throw new Error("logged out");
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        return resp.text();
      })
      .then(function (html) {
        el.innerHTML = html;
        el.classList.remove("refreshed"); void el.offsetWidth; el.classList.add("refreshed");
        state.refreshes += 1;
        document.body.setAttribute("data-live-refreshes", String(state.refreshes));
      })
      .catch(function (err) { setStatus("dead", "refresh failed: " + err.message); })
      .then(function () {
        inFlight[name] = false;
        if (again[name]) { again[name] = false; refresh(name); }
      });
  }

  function refreshAll() {
    var els = document.querySelectorAll("[data-region]");
    for (var i = 0; i < els.length; i++) refresh(els[i].getAttribute("data-region"));
  }

  function schedule() {
    // Coalesce bursts: one refresh per region per ~150 ms, well inside the one-second promise.
    if (pending) return;
    pending = setTimeout(function () { pending = null; refreshAll(); }, 150);
  }

  function connect() {
    var proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(proto + "//" + window.location.host + "/ws/live/");
    setStatus("off", state.connects ? "reconnecting" : "connecting");
    socket.onopen = function () {
      socket.send(JSON.stringify({ subscribe: scope }));
    };
    socket.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === "subscribed") {
        var caughtUp = state.connects > 0;
        state.connects += 1;
        backoff = 500;
        setStatus("on", "live");
        if (caughtUp) refreshAll(); // whatever happened while we were away
      } else if (msg.type === "changes") {
        state.messages += 1;
        state.lastChanges = msg.changes;
        indicator.classList.add("pulse");
        setTimeout(function () { indicator.classList.remove("pulse"); }, 400);
        schedule();
      } else if (msg.type === "error") {
        setStatus("dead", msg.error);
      }
    };
    socket.onclose = function () {
      setStatus("off", "reconnecting in " + Math.round(backoff / 1000) + "s");
      setTimeout(connect, backoff);
      backoff = Math.min(maxBackoff, backoff * 2);
    };
  }

  // Connection status (watchers) and the stuck-claims badge (the detector runs on its own clock) also
  // change without events this page subscribes to: refresh them now and then.
  setInterval(function () { if (state.status === "on") { refresh("conn"); refresh("navstuck"); } }, 15000);
  connect();
})();
