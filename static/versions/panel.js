// Versions panel: the few behaviours htmx attributes cannot express.
// Opens the confirmation <dialog> as a modal, closes it on Cancel / Escape, shows request
// errors in words, shows that every request is working, moves focus (and the view) to a
// receipt or an error when one appears, tells the views an action changed to refresh (and
// merges a refreshed list into the one on the page), shows
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
    var quiet = el && el.hasAttribute && el.hasAttribute("data-refresh");  // a view catching up
    if (!quiet && target && target.setAttribute && target.id !== "dialog-slot") target.setAttribute("aria-busy", "true");
    if (!quiet && el && el.setAttribute) el.setAttribute("aria-busy", "true");
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
    // refreshes itself (hx-trigger="versions:changed from:body"), except what the action's
    // own answer just replaced (it is already current). A refused restore (409) wrote nothing.
    var verb = (event.detail.requestConfig && event.detail.requestConfig.verb) || "get";
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (verb !== "get" && event.detail.successful && status < 300) {
      var swappedId = target && target.id && target.id !== "dialog-slot" ? target.id : null;
      setTimeout(function () {
        justSwapped = swappedId;
        htmx.trigger(document.body, "versions:changed");
        justSwapped = null;
      }, 0);
    }
  });

  // ------------------------------------------------------------------ views kept current
  // A view marked data-refresh asks for itself again on "versions:changed". A list of rows
  // (data-refresh="rows") sends the ids of its open rows (their heads come back open) and the
  // answer is merged in, not swapped: new rows come in at their place, rows that left go, a
  // closed row that changed is replaced, and an open row keeps its body — the receipt or the
  // diff being read, a name being typed — with only its head replaced. A row with a request
  // of its own on the way is left to it. Focus stays.
  var justSwapped = null;

  function refreshing(el) {
    return el && el.hasAttribute && el.hasAttribute("data-refresh");
  }

  document.addEventListener("htmx:confirm", function (event) {
    var el = event.detail.elt;
    if (!refreshing(el) || !justSwapped) return;
    var swapped = document.getElementById(justSwapped);
    if (swapped && swapped.contains(el)) event.preventDefault();
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var el = event.detail.elt;
    if (!refreshing(el) || el.getAttribute("data-refresh") !== "rows") return;
    Array.prototype.forEach.call(el.children, function (row) {
      if (row.id && row.classList.contains("expanded")) {
        event.detail.parameters.append("open", row.id.replace(/^[a-z]+-/, ""));
      }
    });
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var el = event.detail.elt;
    if (!refreshing(el) || el.getAttribute("data-refresh") !== "rows") return;
    event.detail.shouldSwap = false;
    event.detail.isError = false;  // a view catching up says nothing when it cannot
    if (event.detail.xhr.status !== 200) return;
    var doc = new DOMParser().parseFromString(event.detail.serverResponse, "text/html");
    var incoming = doc.getElementById(el.id);
    if (incoming) mergeRows(el, incoming);
  });

  function replaced(old, now) {
    old.replaceWith(now);
    htmx.process(now);
    return now;
  }

  function mergeRows(list, incoming) {
    var active = document.activeElement;
    var focusId = active && active !== document.body && list.contains(active) ? active.id : null;
    var mine = {};
    Array.prototype.forEach.call(list.children, function (row) { if (row.id) mine[row.id] = row; });
    var order = [];
    var added = [];
    Array.prototype.forEach.call(incoming.children, function (source) {
      var row = document.importNode(source, true);
      localTimes(row);
      var current = row.id ? mine[row.id] : null;
      if (current && (current.hasAttribute("aria-busy") || current.querySelector("[aria-busy]"))) {
        row = current;  // a request of its own is on its way (opening it, an action): left to it
      } else if (current && current.classList.contains("expanded")) {
        var head = row.querySelector(".row-head");
        var oldHead = current.querySelector(".row-head");
        if (head && oldHead && !head.isEqualNode(oldHead)) replaced(oldHead, head);
        row = current;
      } else if (current) {
        if (current.classList.contains("fresh")) row.classList.add("fresh");
        row = row.isEqualNode(current) ? current : replaced(current, row);
      } else {
        added.push(row);
      }
      order.push(row);
    });
    Array.prototype.slice.call(list.children).forEach(function (row) {
      if (order.indexOf(row) === -1) row.remove();
    });
    order.forEach(function (row, i) {
      var at = list.children[i];
      if (at !== row) list.insertBefore(row, at || null);
    });
    added.forEach(function (row) { htmx.process(row); });
    if (focusId && document.activeElement === document.body) {
      var again = document.getElementById(focusId);
      if (again) again.focus({ preventScroll: true });
    }
  }

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
    // A line comment form's Cancel: the form's row goes, focus goes back to its line number.
    var cancel = event.target.closest && event.target.closest("[data-cancel-row]");
    if (cancel) {
      event.preventDefault();
      var row = cancel.closest("tr");
      var line = row && row.previousElementSibling;
      var link = line && line.querySelector(".ln-link");
      if (row) row.remove();
      if (link) link.focus();
    }
  });

  // A line number clicked while its comment form is open: no second form, focus the first.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var number = event.detail.elt;
    if (!number.classList || !number.classList.contains("ln-link")) return;
    var next = number.closest("tr").nextElementSibling;
    if (next && next.classList.contains("comment-form-row")) {
      event.preventDefault();
      var area = next.querySelector("textarea");
      if (area) area.focus();
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

  // Filters fold away on a phone (open as rendered elsewhere, and while a filter is on).
  var phone = window.matchMedia("(max-width: 760px)");
  function foldFilters(root) {
    var folds = root.querySelectorAll ? root.querySelectorAll("details[data-fold]") : [];
    for (var i = 0; i < folds.length; i++) {
      var on = folds[i].querySelector("summary .badge");
      folds[i].open = !phone.matches || !!on;
    }
  }
  document.addEventListener("DOMContentLoaded", function () { foldFilters(document); });
  document.addEventListener("htmx:load", function (event) {
    var el = event.detail.elt;
    if (el && el.querySelector && el.id === "tab-body") foldFilters(el);
  });

  // ------------------------------------------------------------------ Viewed marks (compare)
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("input[data-viewed]")) return;
    var id = box.getAttribute("data-viewed");
    var section = document.getElementById("file-" + id);
    var item = document.getElementById("nav-" + id);
    if (section) section.classList.toggle("is-viewed", box.checked);
    if (item) item.classList.toggle("viewed", box.checked);
    var count = document.getElementById("viewed-count");
    if (count) count.textContent = String(document.querySelectorAll("input[data-viewed]:checked").length);
  });

  // ------------------------------------------------------------------ review keys
  // j / k: next / previous file; n / p: next / previous change; ?: the list of keys.
  var KEYS = [
    ["j", "Next file"], ["k", "Previous file"],
    ["n", "Next change"], ["p", "Previous change"],
    ["?", "Show these keys"], ["Esc", "Close"],
  ];

  function showKeys() {
    var old = document.getElementById("keys-dialog");
    if (old) { old.showModal(); return; }
    var dialog = document.createElement("dialog");
    dialog.id = "keys-dialog";
    dialog.className = "keys";
    dialog.setAttribute("aria-labelledby", "keys-title");
    var title = document.createElement("h2");
    title.id = "keys-title";
    title.textContent = "Keyboard keys";
    var list = document.createElement("dl");
    KEYS.forEach(function (pair) {
      var dt = document.createElement("dt");
      var kbd = document.createElement("kbd");
      kbd.textContent = pair[0];
      dt.appendChild(kbd);
      var dd = document.createElement("dd");
      dd.textContent = pair[1];
      list.appendChild(dt);
      list.appendChild(dd);
    });
    var close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.setAttribute("data-close-dialog", "");
    dialog.appendChild(title);
    dialog.appendChild(list);
    dialog.appendChild(close);
    document.body.appendChild(dialog);
    dialog.showModal();
    close.focus();
  }

  function visible(el) { return el.offsetParent !== null || el.getClientRects().length > 0; }

  function moveTo(items, step, cls) {
    if (!items.length) return;
    var current = document.querySelector("." + cls);
    var index = current ? items.indexOf(current) : -1;
    if (index === -1) {
      // Start from what is on the screen.
      var top = 0;
      index = step > 0 ? -1 : items.length;
      for (var i = 0; i < items.length; i++) {
        if (items[i].getBoundingClientRect().top > top + 4) { index = step > 0 ? i - 1 : i; break; }
      }
    }
    var next = Math.min(items.length - 1, Math.max(0, index + step));
    if (current) current.classList.remove(cls);
    var target = items[next];
    target.classList.add(cls);
    target.scrollIntoView({ block: "start" });
    if (target.matches("section")) {
      if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
      target.focus({ preventScroll: true });
    }
  }

  function files() {
    return Array.prototype.filter.call(document.querySelectorAll("section.diff"), visible);
  }

  function changes() {
    // The first row of every run of changed lines.
    var rows = document.querySelectorAll(".diff-table tr.l-added, .diff-table tr.l-removed, .diff-table tr.l-change");
    var out = [];
    for (var i = 0; i < rows.length; i++) {
      var prev = rows[i].previousElementSibling;
      var startsRun = !prev || !/\bl-(added|removed|change)\b/.test(prev.className);
      if (startsRun && visible(rows[i])) out.push(rows[i]);
    }
    return out;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    var t = event.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (document.querySelector("dialog[open]")) return;
    var key = event.key;
    if (key === "?") { event.preventDefault(); showKeys(); }
    else if (key === "j" || key === "k") { event.preventDefault(); moveTo(files(), key === "j" ? 1 : -1, "key-current"); }
    else if (key === "n" || key === "p") { event.preventDefault(); moveTo(changes(), key === "n" ? 1 : -1, "key-change"); }
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-show-keys]")) showKeys();
  });
})();
