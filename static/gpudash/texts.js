// The words the page's scripts show, in the page's language: the JSON block base.html renders
// ({% ui_texts %}). window.gpudash.t(key, values) looks a word up and fills its "{name}" placeholders
// from `values`. One file for every script: base.html loads it first, and deferred scripts run in the
// order of the page, so the scripts after it (and copy.js, included further down) find it.
(function () {
  "use strict";
  var gpudash = window.gpudash = window.gpudash || {};
  gpudash.t = function (key, values) {
    var el = document.getElementById("gpudash-texts"), all = {};
    try { all = JSON.parse(el.textContent); } catch (e) { all = {}; }
    return String(all[key] || key).replace(/\{(\w+)\}/g, function (m, name) { return values && name in values ? values[name] : m; });
  };
})();
