// Form behaviour every page may use, kept out of the templates so the Content-Security-Policy can
// forbid inline scripts:
//  - <select|input data-autosubmit> submits its form when it changes (cluster picker, filters);
//  - <form id="confirm-form" data-confirm="..."> asks before anything is sent: a <dialog
//    id="confirm-dialog">, falling back to confirm() where <dialog> is unsupported.
(function () {
  "use strict";
  document.addEventListener("change", function (ev) {
    var el = ev.target;
    if (el && el.hasAttribute && el.hasAttribute("data-autosubmit") && el.form) el.form.submit();
  });

  var form = document.getElementById("confirm-form"), dialog = document.getElementById("confirm-dialog");
  if (!form || !dialog) return;
  form.addEventListener("submit", function (ev) {
    if (form.dataset.confirmed) return;
    ev.preventDefault();
    if (!dialog.showModal) { if (window.confirm(form.dataset.confirm)) { form.dataset.confirmed = "1"; form.submit(); } return; }
    document.getElementById("confirm-text").textContent = form.dataset.confirm;
    dialog.returnValue = "";
    dialog.showModal();
  });
  dialog.addEventListener("close", function () {
    if (dialog.returnValue === "ok") { form.dataset.confirmed = "1"; form.submit(); }
  });
})();
