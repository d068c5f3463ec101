// Page behaviour for accessibility and small screens, kept out of the templates (the
// Content-Security-Policy forbids inline scripts):
//  - the navigation collapses behind "Menu" at narrow widths (the button says whether it is open);
//  - a form whose answer takes longer than 300 ms shows a busy state (aria-busy, "Working…");
//  - the fleet map is one Tab stop: arrow keys, Home/End and PageUp/PageDown move between its cells
//    and node names (a roving tabindex), so a keyboard user does not tab through thousands of devices;
//  - "/" puts the cursor in the search box.
(function () {
  "use strict";
  var BUSY_AFTER_MS = 300;

  // The words this script shows, in the page's language (texts.js, loaded before this file).
  var t = window.gpudash.t;

  function ready(fn) { if (document.readyState !== "loading") fn(); else document.addEventListener("DOMContentLoaded", fn); }

  // --- "/" focuses the search box (as on GitHub and in most consoles), unless the user is typing ---
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) return;
    var target = ev.target, tag = target && target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable)) return;
    var search = document.getElementById("global-search");
    if (!search) return;
    ev.preventDefault();
    if (document.body.classList.contains("nav-open") === false && search.offsetParent === null) {
      var toggle = document.querySelector(".navtoggle");  // on a phone the search sits in the closed menu
      if (toggle) toggle.click();
    }
    search.focus();
    search.select();
  });

  // --- navigation menu ------------------------------------------------------------------------
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest && ev.target.closest(".navtoggle");
    if (!button) return;
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    document.body.classList.toggle("nav-open", open);
  });

  // --- the top bar's height, for the sticky table headers under it (it wraps with the window) ---
  ready(function () {
    var bar = document.querySelector(".topbar");
    if (!bar) return;
    function measure() { document.documentElement.style.setProperty("--topbar-h", bar.offsetHeight + "px"); }
    measure();
    if (window.ResizeObserver) new ResizeObserver(measure).observe(bar);
  });

  // --- busy state on slow actions ---------------------------------------------------------------
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (ev.defaultPrevented || !form || form.getAttribute("aria-busy") === "true") return;
    var button = ev.submitter || form.querySelector("button[type=submit], button:not([type])");
    setTimeout(function () {
      form.setAttribute("aria-busy", "true");
      form.classList.add("busy");
      if (button) {
        button.setAttribute("aria-disabled", "true");
        button.dataset.idleText = button.textContent;
        button.textContent = t("working");
      }
    }, BUSY_AFTER_MS);
  });
  // Back from the browser's cache (history navigation): not busy any more.
  window.addEventListener("pageshow", function (ev) {
    if (!ev.persisted) return;
    document.querySelectorAll("form.busy").forEach(function (form) {
      form.removeAttribute("aria-busy");
      form.classList.remove("busy");
      form.querySelectorAll("[data-idle-text]").forEach(function (b) { b.textContent = b.dataset.idleText; b.removeAttribute("aria-disabled"); });
    });
  });

  // --- fleet map: one Tab stop, arrow keys inside -------------------------------------------------
  function mapCells(map) { return map.querySelectorAll("a[href]"); }

  function rove(map) {
    var cells = mapCells(map), current = map.querySelector('a[tabindex="0"]');
    for (var i = 0; i < cells.length; i++) cells[i].setAttribute("tabindex", "-1");
    if (cells.length) (current && map.contains(current) ? current : cells[0]).setAttribute("tabindex", "0");
  }

  function moveTo(map, cell) {
    if (!cell) return;
    var old = map.querySelectorAll('a[tabindex="0"]');
    for (var i = 0; i < old.length; i++) old[i].setAttribute("tabindex", "-1");
    cell.setAttribute("tabindex", "0");
    cell.focus();
  }

  function onMapKey(ev) {
    var map = ev.currentTarget, cell = ev.target;
    if (!cell.matches || !cell.matches(".maprow a[href]")) return;
    var row = cell.closest(".maprow"), rowCells, index, rows, r;
    if (!row) return;
    rowCells = Array.prototype.slice.call(row.querySelectorAll("a[href]"));
    index = rowCells.indexOf(cell);
    rows = Array.prototype.slice.call(map.querySelectorAll(".maprow"));
    r = rows.indexOf(row);
    function cellOf(rowIndex) {
      var target = rows[rowIndex];
      if (!target) return null;
      var cs = target.querySelectorAll("a[href]");
      return cs[Math.min(index, cs.length - 1)] || null;
    }
    var next = null;
    switch (ev.key) {
      case "ArrowRight": next = rowCells[index + 1] || cellOf(r + 1); break;
      case "ArrowLeft": next = rowCells[index - 1] || null; break;
      case "ArrowDown": next = cellOf(r + 1); break;
      case "ArrowUp": next = cellOf(r - 1); break;
      case "PageDown": next = cellOf(Math.min(rows.length - 1, r + 10)); break;
      case "PageUp": next = cellOf(Math.max(0, r - 10)); break;
      case "Home": next = ev.ctrlKey ? mapCells(map)[0] : rowCells[0]; break;
      case "End": next = ev.ctrlKey ? mapCells(map)[mapCells(map).length - 1] : rowCells[rowCells.length - 1]; break;
      default: return;
    }
    ev.preventDefault();
    moveTo(map, next);
  }

  function setUpMaps(root) {
    var maps = (root || document).querySelectorAll(".fleetmap");
    for (var i = 0; i < maps.length; i++) {
      var map = maps[i];
      rove(map);
      if (!map.dataset.roving) {
        map.dataset.roving = "1";
        map.addEventListener("keydown", onMapKey);
        map.setAttribute("role", "group");
        if (!map.getAttribute("aria-label")) map.setAttribute("aria-label", "Fleet map: one cell per device; arrow keys move between devices, Enter opens one");
      }
    }
  }

  ready(function () { setUpMaps(document); });
  // A live refresh merged new cells in: they come without tabindex (live.js sends this event).
  document.addEventListener("gpudash:region-merged", function () { setUpMaps(document); });
})();
