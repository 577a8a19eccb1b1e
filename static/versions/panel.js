// Versions panel: the few behaviours htmx attributes cannot express.
// Opens the confirmation <dialog> as a modal, closes it on Cancel / Escape, shows request
// errors in words, shows that every request is working, moves focus (and the view) to a
// receipt or an error when one appears, tells the views an action changed to refresh, shows
// times in the viewer's time zone (UTC on hover), and the review keys (j/k, n/p, ?).
(function () {
  "use strict";

  var opener = null;
  var pending = 0;

  function flash(message) {
    var box = document.getElementById("flash");
    if (!box) return;
    box.textContent = message;
    box.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(function () { box.hidden = true; }, 9000);
    return box;
  }

  function closeDialog(dialog) {
    if (dialog && dialog.open) dialog.close();
  }

  // The result of an action gets the focus and is scrolled into view (on a phone too).
  function focusResult(el) {
    if (!el) return;
    if (!el.hasAttribute("tabindex")) el.setAttribute("tabindex", "-1");
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: "nearest" });
  }

  // ------------------------------------------------------------------ progress
  // Every htmx request shows at once that it is working: the progress bar at the top, and
  // aria-busy on what it will replace (styled as busy), until the answer is in.
  function setBusy(on) {
    var bar = document.getElementById("progress");
    if (bar) bar.hidden = !on;
    document.body.classList.toggle("is-busy", on);
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var el = event.detail.elt;
    if (el && el.getAttribute && el.getAttribute("hx-target") === "#dialog-slot") opener = el;
    var target = event.detail.target;
    if (target && target.setAttribute && target.id !== "dialog-slot") target.setAttribute("aria-busy", "true");
    if (el && el.setAttribute) el.setAttribute("aria-busy", "true");
    pending += 1;
    setBusy(true);
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var el = event.detail.elt;
    var target = event.detail.target;
    if (target && target.removeAttribute) target.removeAttribute("aria-busy");
    if (el && el.removeAttribute) el.removeAttribute("aria-busy");
    pending = Math.max(0, pending - 1);
    if (!pending) setBusy(false);
    // An action that succeeded changed something: every view showing what it changed
    // refreshes itself (hx-trigger="versions:changed from:body").
    var verb = (event.detail.requestConfig && event.detail.requestConfig.verb) || "get";
    if (verb !== "get" && event.detail.successful) {
      setTimeout(function () { htmx.trigger(document.body, "versions:changed"); }, 0);
    }
  });

  // ------------------------------------------------------------------ dialogs and results
  document.addEventListener("htmx:load", function (event) {
    var el = event.detail.elt;
    if (!el || !el.matches) return;
    localTimes(el);
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
      return;
    }
    var result = el.matches(".receipt[data-focus]") ? el : el.querySelector(".receipt[data-focus]");
    if (!result) result = el.querySelector(".status.error, .findings");
    if (result) focusResult(result);
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-close-dialog]");
    if (button) {
      event.preventDefault();
      closeDialog(button.closest("dialog"));
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
    var dialog = document.querySelector("dialog[open]");
    if (dialog) { opener = null; closeDialog(dialog); }
    focusResult(flash(words));
  });

  document.addEventListener("htmx:sendError", function () {
    var dialog = document.querySelector("dialog[open]");
    if (dialog) { opener = null; closeDialog(dialog); }
    focusResult(flash("The server could not be reached. Check your connection and try again."));
  });

  // ------------------------------------------------------------------ local times
  // <time datetime> from the `when` tag: its absolute part in the viewer's time zone, with
  // the UTC time on hover (title), on phones too.
  var localFormat = null;
  try {
    localFormat = new Intl.DateTimeFormat(undefined, {
      year: "numeric", month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", timeZoneName: "short",
    });
  } catch (e) { localFormat = null; }

  function localTimes(root) {
    if (!localFormat || !root.querySelectorAll) return;
    var times = root.querySelectorAll("time[datetime][data-utc]");
    for (var i = 0; i < times.length; i++) {
      var t = times[i];
      var moment = new Date(t.getAttribute("datetime"));
      if (isNaN(moment.getTime())) continue;
      var local = t.nextElementSibling;
      if (local && !local.matches(".abs[data-local]")) local = null;
      var utc = t.getAttribute("data-utc");
      t.title = localFormat.format(moment) + " · " + utc;
      if (local && !local.hasAttribute("data-done")) {
        local.textContent = localFormat.format(moment);
        local.title = utc;
        local.setAttribute("data-done", "");
      }
    }
  }

  document.addEventListener("DOMContentLoaded", function () { localTimes(document); });
})();
