// Live updates for gpudash pages: one websocket per page, regions re-fetched and merged in place.
//
// The page declares its scope in <body data-live-scope='{"cluster":1,"kind":["ResourceClaim"]}'>
// and its refreshable parts as elements with data-region="name". When the server reports a change
// in scope, each region is re-fetched from the same URL (same filters) with ?fragment=name and
// merged into the page with idiomorph (static/gpudash/vendor/idiomorph/): nodes that did not change
// stay the same nodes, so focus, text selection, ticked boxes, typed text, open <details> and the
// scroll position survive. Rows carry stable ids so a new row at the top does not shift every other
// row's node. What the user changed (a tick, a typed value, a <details> opened or closed) is never
// overwritten by the server's copy.
//
// While the user is working in a region (focus or a text selection inside it, a box ticked, a value
// typed) its updates are held: a "N updates — show" button appears above it, and the updates are
// merged when the user presses it or stops (focus leaves, nothing ticked or typed any more).
//
// Screen readers hear a short summary per region, not the region itself: each region has its own
// status message (role=status, atomic) saying what a merge changed ("Claims updated: 2 added,
// 0 removed, 1 changed", counted over its rows with ids), at most every 10 s per region with the
// counts summed meanwhile, and nothing when a merge changed nothing. The regions are deliberately not
// aria-live themselves: a table that churns twice a second would be read out cell by cell.
//
// Reconnects with backoff; after a reconnect every region is re-fetched so a client never keeps a gap.
(function () {
  "use strict";
  var scopeText = document.body.getAttribute("data-live-scope");
  var scope = null;
  try { scope = JSON.parse(scopeText); } catch (e) { scope = null; }
  var indicator = document.getElementById("live");
  var announcer = document.getElementById("live-announce");
  var state = { status: "off", refreshes: 0, messages: 0, connects: 0, held: {} };
  window.gpudashLive = state;
  if (!scope || !indicator) return;

  var backoff = 500, maxBackoff = 10000, socket = null, pending = null, inFlight = {}, again = {};
  var notices = {}, lastFocus = {}, announced = {}, statuses = {}, tallies = {}, speakTimers = {}, failed = false;
  var RETRY_MS = 3000; // a region whose fetch failed is fetched again after this long
  var ANNOUNCE_EVERY_MS = 10000; // a region's summary at most this often: churn would talk non-stop

  // The words this script shows, in the page's language (texts.js, loaded before this file).
  var t = window.gpudash.t;

  function setStatus(status, text) {
    state.status = status;
    document.body.setAttribute("data-live", status);
    indicator.className = "live live-" + status;
    indicator.querySelector(".live-text").textContent = text;
  }

  // Texts from the page (#live-announce's data-* attributes, translated by Django), English otherwise;
  // the words are said by each region's status message (statusEl), not by #live-announce.
  function text(key, fallback, values) {
    var t = (announcer && announcer.getAttribute("data-" + key)) || fallback;
    Object.keys(values || {}).forEach(function (k) { t = t.split("{" + k + "}").join(String(values[k])); });
    return t;
  }

  // The region's own status message, made once (a live region must exist before it speaks).
  function statusEl(name, el) {
    if (!statuses[name]) {
      var s = statuses[name] = document.createElement("div");
      s.className = "visually-hidden";
      s.setAttribute("role", "status");
      s.setAttribute("aria-atomic", "true");
      s.setAttribute("data-status-for", name);
      el.parentNode.insertBefore(s, el.nextSibling);
    }
    return statuses[name];
  }

  function speak(name, el, message) {
    var s = statusEl(name, el);
    // The same words twice in a row are not a change to a screen reader: clear, then say them.
    s.textContent = "";
    setTimeout(function () { s.textContent = message; }, 50);
  }

  // What a merge changed: rows (elements with an id: table rows, map rows) added, removed, changed;
  // a region without such rows counts as changed when its text differs.
  function snapshot(el) {
    var rows = el.querySelectorAll("tr[id], .maprow[id]"), out = { rows: {}, n: rows.length, text: "" };
    for (var i = 0; i < rows.length; i++) out.rows[rows[i].id] = rows[i].textContent;
    if (!rows.length) out.text = el.textContent;
    return out;
  }

  function changes(before, after) {
    var d = { added: 0, removed: 0, changed: 0, rows: before.n > 0 || after.n > 0 };
    if (!d.rows) { d.changed = before.text === after.text ? 0 : 1; return d; }
    Object.keys(after.rows).forEach(function (id) {
      if (!(id in before.rows)) d.added += 1; else if (before.rows[id] !== after.rows[id]) d.changed += 1;
    });
    Object.keys(before.rows).forEach(function (id) { if (!(id in after.rows)) d.removed += 1; });
    return d;
  }

  // Sum what changed and say it now, or when this region's quiet time is over.
  function report(name, el, d) {
    if (!d.added && !d.removed && !d.changed) return;
    var t = tallies[name] = tallies[name] || { added: 0, removed: 0, changed: 0, rows: false };
    t.added += d.added; t.removed += d.removed; t.changed += d.changed; t.rows = t.rows || d.rows;
    if (speakTimers[name]) return;
    var wait = announced[name] ? ANNOUNCE_EVERY_MS - (Date.now() - announced[name]) : 0;
    speakTimers[name] = setTimeout(function () {
      delete speakTimers[name];
      var sum = tallies[name];
      delete tallies[name];
      announced[name] = Date.now();
      var values = { region: label(el), added: sum.added, removed: sum.removed, changed: sum.changed };
      speak(name, el, sum.rows ? text("changes", "{region} updated: {added} added, {removed} removed, {changed} changed.", values)
        : text("updated", "{region} updated.", values));
    }, Math.max(0, wait));
  }

  function regionEl(name) {
    return document.querySelector('[data-region="' + name + '"]');
  }

  // What the announcer calls a region: its aria-label, else the page's heading ("ResourceClaims").
  function label(el) {
    var h1 = document.querySelector("main h1");
    var heading = h1 && h1.firstChild && h1.firstChild.nodeType === 3 ? h1.firstChild.nodeValue.trim() : "";
    return el.getAttribute("aria-label") || heading || el.getAttribute("data-region");
  }

  // A page answering a POST names a GET address for its regions (data-live-url): its own URL takes no GET.
  function regionUrl(name) {
    var url = new URL(document.body.getAttribute("data-live-url") || window.location.href, window.location.href);
    url.searchParams.set("fragment", name);
    return url.toString();
  }

  // --- is the user working in this region? --------------------------------------------------
  function userChanged(input) {
    if (input.type === "checkbox" || input.type === "radio") return input.checked !== input.defaultChecked;
    if (input.tagName === "SELECT") {
      for (var i = 0; i < input.options.length; i++) if (input.options[i].selected !== input.options[i].defaultSelected) return true;
      return false;
    }
    return input.type !== "hidden" && input.type !== "submit" && input.type !== "button" && input.value !== input.defaultValue;
  }

  function isHeld(name, el) {
    var active = document.activeElement;
    if (active && active !== document.body && (el.contains(active) || (notices[name] && notices[name].contains(active)))) return true;
    var sel = window.getSelection && window.getSelection();
    if (sel && !sel.isCollapsed && sel.anchorNode && el.contains(sel.anchorNode)) return true;
    var inputs = el.querySelectorAll("input, select, textarea");
    for (var i = 0; i < inputs.length; i++) if (userChanged(inputs[i])) return true;
    return false;
  }

  // --- the held-updates notice ----------------------------------------------------------------
  function showNotice(name, el) {
    var notice = notices[name];
    if (!notice) {
      notice = notices[name] = document.createElement("div");
      notice.className = "held-notice";
      notice.setAttribute("data-held-for", name);
      var button = document.createElement("button");
      button.type = "button"; // inside a form (the stuck claims' bulk form) it must not submit
      button.addEventListener("click", function () { refresh(name, true); });
      notice.appendChild(button);
      el.parentNode.insertBefore(notice, el);
    }
    var n = state.held[name];
    notice.firstChild.textContent = t(n === 1 ? "heldOne" : "heldMany", { n: n });
    if (n === 1) speak(name, el, text("held", "{region}: updates held while you work here; press \u201cshow\u201d to see them.", { region: label(el) }));
  }

  function dropNotice(name) {
    delete state.held[name];
    if (notices[name]) { notices[name].remove(); delete notices[name]; }
  }

  // --- merging --------------------------------------------------------------------------------
  // idiomorph asks before changing an attribute; false keeps what the user made of it.
  function keepUserState(attr, node, type) {
    // What ui.js manages on the fleet map (a roving tabindex) is not the server's to remove.
    if (type === "remove" && (node.hasAttribute("data-roving") || (attr === "tabindex" && node.closest("[data-roving]")))) return false;
    if (attr === "open" && node.tagName === "DETAILS") return false;
    if ((attr === "checked" || attr === "value") && (node.tagName === "INPUT" || node.tagName === "TEXTAREA") && userChanged(node)) return false;
    if (attr === "selected" && node.tagName === "OPTION" && node.selected !== node.defaultSelected) return false;
    return true;
  }

  function merge(name, el, html) {
    var focusBack = lastFocus[name];
    var quiet = name === "conn" || name === "navstuck"; // the badges speak for themselves
    var before = quiet ? null : snapshot(el);
    window.Idiomorph.morph(el, html, {
      morphStyle: "innerHTML", ignoreActiveValue: true, restoreFocus: true,
      callbacks: { beforeAttributeUpdated: keepUserState },
    });
    var hadNotice = !!notices[name];
    dropNotice(name);
    // "show" was pressed: back to where the user was, if that element is still there.
    if (hadNotice && focusBack && el.contains(focusBack) && (!document.activeElement || document.activeElement === document.body)) {
      focusBack.focus({ preventScroll: true });
    }
    el.classList.remove("refreshed"); void el.offsetWidth; el.classList.add("refreshed");
    state.refreshes += 1;
    document.body.setAttribute("data-live-refreshes", String(state.refreshes));
    document.dispatchEvent(new CustomEvent("gpudash:region-merged", { detail: { region: name, element: el } }));
    if (!quiet) report(name, el, changes(before, snapshot(el)));
  }

  function refresh(name, force) {
    var el = regionEl(name);
    if (!el) return;
    if (!force && isHeld(name, el)) {
      state.held[name] = (state.held[name] || 0) + 1;
      showNotice(name, el);
      return;
    }
    if (inFlight[name]) { again[name] = again[name] === "force" || force ? "force" : true; return; }
    inFlight[name] = true;
    el.setAttribute("aria-busy", "true");
    fetch(regionUrl(name), { credentials: "same-origin", headers: { "X-Requested-With": "gpudash-live" } })
      .then(function (resp) {
        if (resp.redirected && resp.url.indexOf("/accounts/login") !== -1) throw new Error("logged out");
        if (!resp.ok) throw new Error("HTTP " + resp.status);
        return resp.text();
      })
      .then(function (html) {
        if (failed) { failed = false; if (socket && socket.readyState === WebSocket.OPEN) setStatus("on", t("live")); }
        // Held again while the answer was on its way (a box ticked meanwhile): keep it for "show".
        if (!force && isHeld(name, el)) { state.held[name] = (state.held[name] || 0) + 1; showNotice(name, el); return; }
        merge(name, el, html);
      })
      .catch(function (err) {
        // A passing server error (a 500 while the database is busy) must not end live updates: retry.
        var retry = err.message !== "logged out";
        failed = retry;
        setStatus("dead", t(retry ? "refreshFailedRetrying" : "refreshFailed", { error: err.message }));
        if (retry) setTimeout(function () { refresh(name, force); }, RETRY_MS);
      })
      .then(function () {
        el.removeAttribute("aria-busy");
        inFlight[name] = false;
        if (again[name]) { var forced = again[name] === "force"; again[name] = false; refresh(name, forced); }
      });
  }

  function refreshAll() {
    var els = document.querySelectorAll("[data-region]");
    for (var i = 0; i < els.length; i++) refresh(els[i].getAttribute("data-region"));
  }

  // The user stopped working in a held region: bring it up to date.
  function releaseHeld() {
    Object.keys(state.held).forEach(function (name) {
      var el = regionEl(name);
      if (el && !isHeld(name, el)) refresh(name, true);
    });
  }
  function releaseSoon() { setTimeout(releaseHeld, 0); }
  document.addEventListener("focusout", function (ev) {
    var els = document.querySelectorAll("[data-region]");
    for (var i = 0; i < els.length; i++) if (els[i].contains(ev.target)) lastFocus[els[i].getAttribute("data-region")] = ev.target;
    releaseSoon();
  });
  document.addEventListener("change", releaseSoon);
  document.addEventListener("selectionchange", function () { if (Object.keys(state.held).length) releaseSoon(); });

  function schedule() {
    // Coalesce bursts: one refresh per region per ~150 ms, well inside the one-second promise.
    if (pending) return;
    pending = setTimeout(function () { pending = null; refreshAll(); }, 150);
  }

  function connect() {
    var proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(proto + "//" + window.location.host + "/ws/live/");
    setStatus("off", t(state.connects ? "reconnecting" : "connecting"));
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
        setStatus("on", t("live"));
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
      setStatus("off", t("reconnectingIn", { s: Math.round(backoff / 1000) }));
      setTimeout(connect, backoff);
      backoff = Math.min(maxBackoff, backoff * 2);
    };
  }

  // Connection status (watchers) and the stuck-claims badge (the detector runs on its own clock) also
  // change without events this page subscribes to: refresh them now and then.
  setInterval(function () { if (state.status === "on") { refresh("conn"); refresh("navstuck"); } }, 15000);
  var regions = document.querySelectorAll("[data-region]");
  for (var i = 0; i < regions.length; i++) {
    var regionName = regions[i].getAttribute("data-region");
    if (regionName !== "conn" && regionName !== "navstuck") statusEl(regionName, regions[i]);
  }
  connect();
})();
