// The hosted pairing page's refresh: asks the page's status endpoint for the fresh QR
// code, the state and the expiry, and turns the page to success, or to the reason it
// ended. The page works without it (by reloading).
(function () {
  "use strict";
  var page = document.getElementById("page");
  if (!page || !page.dataset.status) { return; }
  var every = parseInt(page.dataset.pollMs, 10) || 2000;
  var qr = document.getElementById("qr");
  var wait = document.getElementById("wait");
  var pairing = document.getElementById("pairing");
  var paired = document.getElementById("paired");
  var ended = document.getElementById("ended");
  if (!pairing || !paired) { return; }
  var reasons = {
    used: "This link was already used to link a phone.",
    revoked: "This link was withdrawn. Ask for a new link.",
    expired: "This link has expired. Ask for a new link."
  };
  var expiry = document.getElementById("expiry");
  function done(ok, why) {
    pairing.hidden = true;
    if (expiry) { expiry.hidden = true; }
    if (ok) { paired.hidden = false; } else if (ended) { ended.textContent = why; ended.hidden = false; }
  }
  function tick() {
    fetch(page.dataset.status, { cache: "no-store", credentials: "omit" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) { setTimeout(tick, every); return; }
        if (s.paired) { done(true); return; }
        if (s.link !== "active") { done(false, reasons[s.link] || "This link no longer works."); return; }
        if (s.qr && qr) {
          if (qr.getAttribute("src") !== s.qr) { qr.setAttribute("src", s.qr); }
          qr.setAttribute("data-code", s.code || "");
          qr.hidden = false;
          if (wait) { wait.hidden = true; }
        }
        setTimeout(tick, every);
      })
      .catch(function () { setTimeout(tick, every); });
  }
  tick();
})();
