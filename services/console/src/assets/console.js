// paceline console: an instance's page follows its state. It asks /i/{id}/qr.json
// (same origin, the session cookie) every 2 s while the instance is on its way
// (disconnected after a Connect, connecting, waiting for a scan) and every 10 s
// otherwise; it swaps in a new QR code when the network shows one, and reloads the page
// when the state changes. Without this script the page still works by reloading it.
(function () {
  "use strict";
  var state = document.getElementById("state");
  if (!state || !state.dataset.poll) return;
  var shown = state.dataset.state;
  var busy = { disconnected: 1, connecting: 1, qr_pending: 1 };
  function next() { window.setTimeout(tick, busy[shown] ? 2000 : 10000); }
  function tick() {
    fetch(state.dataset.poll, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) return;
        if (s.state !== shown) { window.location.reload(); return; }
        var qr = document.getElementById("qr");
        if (qr && s.qr && s.code !== qr.dataset.code) {
          if (qr.tagName === "IMG") {
            qr.src = s.qr;
            qr.dataset.code = s.code;
          } else { window.location.reload(); }
        }
      })
      .catch(function () {})
      .then(next);
  }
  next();
})();

// The live events page: follows /i/{id}/events/stream (the API's event stream through
// the console) with an EventSource, which reconnects by itself and resumes after the
// last event it saw (Last-Event-ID). The newest event is on top; 200 are kept.
(function () {
  "use strict";
  var state = document.getElementById("stream-state");
  var list = document.getElementById("events");
  if (!state || !list || !window.EventSource) return;
  var source = new EventSource(state.dataset.stream);
  function show(e) {
    var li = document.createElement("li");
    var head = document.createElement("div");
    head.className = "meta";
    var data = e.data;
    var at = "";
    try { var parsed = JSON.parse(e.data); data = JSON.stringify(parsed.data, null, 2); at = parsed.created_at || ""; } catch (x) {}
    head.textContent = e.type + " · " + at + " · " + e.lastEventId;
    var body = document.createElement("pre");
    body.className = "text";
    body.textContent = data;
    li.appendChild(head);
    li.appendChild(body);
    list.insertBefore(li, list.firstChild);
    while (list.children.length > 200) list.removeChild(list.lastChild);
  }
  state.dataset.types.split(",").forEach(function (t) { source.addEventListener(t, show); });
  source.onopen = function () { state.textContent = "Connected: new events appear at the top."; };
  source.onerror = function () {
    state.textContent = source.readyState === EventSource.CLOSED
      ? "The stream ended (signed out, or not allowed); reload the page."
      : "Reconnecting…";
  };
})();

// A run over every instance with a tag: the page shows the first step's progress and a
// form for the next; this sends that form by itself (asking for JSON), step after step,
// updating the progress and listing failures, until the run is done or Stop is pressed.
// Without this script each step is a click on Continue.
(function () {
  "use strict";
  var form = document.getElementById("run-next");
  if (!form || !window.fetch) return;
  var stop = document.getElementById("run-stop");
  var stopped = false;
  stop.hidden = false;
  stop.addEventListener("click", function () {
    stopped = true;
    stop.hidden = true;
  });
  function set(id, v) { document.getElementById(id).textContent = String(v); }
  function field(name, v) { form.elements[name].value = String(v); }
  function step() {
    if (stopped) return;
    // (`form.action` is the input named "action", not the address.)
    fetch(form.getAttribute("action"), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(new FormData(form)).toString()
    })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (p) {
        var done = p.succeeded + p.failed;
        var bar = document.getElementById("run-progress");
        bar.max = Math.max(p.total, done);
        bar.value = done;
        bar.textContent = done + " of " + p.total;
        set("run-done", done);
        set("run-succeeded", p.succeeded);
        set("run-failed", p.failed);
        var list = document.getElementById("run-failures");
        p.failures.forEach(function (f) {
          var li = document.createElement("li");
          var a = document.createElement("a");
          a.href = "/i/" + encodeURIComponent(f[0]);
          a.textContent = f[0];
          li.appendChild(a);
          li.appendChild(document.createTextNode(": " + f[1]));
          list.appendChild(li);
        });
        if (!p.next_cursor) {
          form.parentNode.removeChild(form);
          document.getElementById("run-summary").appendChild(document.createTextNode(" Finished."));
          return;
        }
        field("cursor", p.next_cursor);
        field("succeeded", p.succeeded);
        field("failed", p.failed);
        field("total", p.total);
        step();
      })
      .catch(function () {
        stop.hidden = true;
        document.getElementById("run-summary").appendChild(document.createTextNode(" Paused: the last step failed; Continue retries it."));
      });
  }
  step();
})();
