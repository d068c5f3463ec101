// Preview page: quick-fill samples, and "Show in the editor" for errors with a YAML line/column.
(function () {
  "use strict";
  function ready(fn) { if (document.readyState !== "loading") fn(); else document.addEventListener("DOMContentLoaded", fn); }

  function gotoPosition(textarea, line, column) {
    var lines = textarea.value.split("\n");
    var offset = 0;
    for (var i = 0; i < Math.min(line - 1, lines.length); i++) offset += lines[i].length + 1;
    var lineText = lines[Math.min(line, lines.length) - 1] || "";
    var start = offset + Math.min(Math.max(column - 1, 0), lineText.length);
    textarea.focus();
    textarea.setSelectionRange(start, offset + lineText.length);
    // Scroll the textarea so the line is visible (line-height from the computed style).
    var lh = parseFloat(getComputedStyle(textarea).lineHeight) || 16;
    textarea.scrollTop = Math.max(0, (line - 3) * lh);
    textarea.classList.add("pv-flash");
    setTimeout(function () { textarea.classList.remove("pv-flash"); }, 1200);
  }

  ready(function () {
    var textarea = document.getElementById("pv-yaml");
    document.querySelectorAll(".pv-sample").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var tpl = document.getElementById("pv-sample-" + btn.dataset.sample);
        if (!tpl || !textarea) return;
        textarea.value = tpl.content ? tpl.content.textContent : tpl.innerHTML;
        textarea.focus();
      });
    });
    // The Namespace field fills in for objects without metadata.namespace: while the user has not typed
    // in it, it shows the namespace the YAML names (its metadata block's `namespace:` line).
    var nsField = document.querySelector("input[name=namespace]");
    if (textarea && nsField) {
      var typed = false;
      nsField.addEventListener("input", function () { typed = true; });
      var follow = function () {
        if (typed) return;
        var m = /^metadata:\s*(?:\{[^}]*\bnamespace:\s*([\w.-]+)|\n(?:[ \t]+.*\n)*?[ \t]+namespace:\s*["']?([\w.-]+))/m.exec(textarea.value);
        var ns = m && (m[1] || m[2]);
        if (ns) nsField.value = ns;
      };
      textarea.addEventListener("input", follow);
      textarea.addEventListener("change", follow);
      document.querySelectorAll(".pv-sample").forEach(function (btn) { btn.addEventListener("click", follow); });
    }
    document.querySelectorAll(".pv-goto").forEach(function (btn) {
      btn.addEventListener("click", function () {
        if (textarea) gotoPosition(textarea, parseInt(btn.dataset.line, 10), parseInt(btn.dataset.column, 10));
      });
    });
  });
})();
