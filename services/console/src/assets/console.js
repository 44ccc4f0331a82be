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
