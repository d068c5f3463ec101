// Copy buttons of the object pages: <button data-copy="ID"> copies the text of element ID.
// One delegated listener, installed once however many includes load this file.
(function () {
  "use strict";
  if (window.gpudashCopy) return;
  window.gpudashCopy = true;
  // The words this script shows, in the page's language (texts.js, loaded before this file).
  var t = window.gpudash.t;
  function fallback(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button[data-copy]") : null;
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.textContent;
    var done = navigator.clipboard && window.isSecureContext ? navigator.clipboard.writeText(text) : fallback(text);
    var label = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", label);
    done.then(function () { button.textContent = button.getAttribute("data-copied") || t("copied"); }, function () { button.textContent = t("copyFailed"); })
      .then(function () { setTimeout(function () { button.textContent = label; }, 1500); });
  });
})();
