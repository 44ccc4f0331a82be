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
