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
    document.querySelectorAll(".pv-goto").forEach(function (btn) {
      btn.addEventListener("click", function () {
        if (textarea) gotoPosition(textarea, parseInt(btn.dataset.line, 10), parseInt(btn.dataset.column, 10));
      });
    });
  });
})();
