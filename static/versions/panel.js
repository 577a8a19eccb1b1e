// Versions panel: the few behaviours htmx attributes cannot express.
// Opens the confirmation <dialog> as a modal, closes it on Cancel / Escape, shows request
// errors in words, and moves focus to a receipt when one appears.
(function () {
  "use strict";

  var opener = null;

  function flash(message) {
    var box = document.getElementById("flash");
    if (!box) return;
    box.textContent = message;
    box.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(function () { box.hidden = true; }, 9000);
  }

  function closeDialog(dialog) {
    if (dialog.open) dialog.close();
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var el = event.detail.elt;
    if (el && el.getAttribute && el.getAttribute("hx-target") === "#dialog-slot") opener = el;
  });

  document.addEventListener("htmx:load", function (event) {
    var el = event.detail.elt;
    if (!el || !el.matches) return;
    var dialog = el.matches("dialog[data-modal]") ? el : el.querySelector("dialog[data-modal]");
    if (dialog && !dialog.open) {
      dialog.addEventListener("close", function () {
        dialog.remove();
        if (opener && document.body.contains(opener)) {
          var button = opener.querySelector("button") || opener;
          button.focus();
        }
      });
      dialog.showModal();
    }
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-close-dialog]");
    if (button) {
      event.preventDefault();
      closeDialog(button.closest("dialog"));
    }
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    if (!target || !target.querySelector) return;
    var receipt = target.querySelector(".receipt[data-focus]");
    if (receipt) {
      receipt.focus({ preventScroll: true });
      receipt.scrollIntoView({ block: "nearest", behavior: "smooth" });
    }
  });

  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var words = xhr.getResponseHeader("X-Versions-Error");
    if (!words) {
      if (xhr.status === 403) words = "Not allowed (403): you may lack the permission, or your session expired. Reload the page and try again.";
      else if (xhr.status === 404) words = "That item no longer exists (404). Reload the page.";
      else words = "The server answered " + xhr.status + ". Reload the page and try again.";
    }
    flash(words);
  });

  document.addEventListener("htmx:sendError", function () {
    flash("The server could not be reached. Check your connection and try again.");
  });
})();
