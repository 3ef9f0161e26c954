// delayd dashboard: live updates, confirmations and actions. No framework,
// no build step; the pages work without this script (a confirmation page
// stands in for confirm()), it only makes them live.
(function () {
  'use strict';
  var PERIOD = 1000;
  var live = document.getElementById('live');
  var toastEl = document.getElementById('toast');
  var seen = {}; // region id -> the HTML the server last sent for it
  var busy = false;
  var timer = 0;

  function regions(root) {
    return root.querySelectorAll('[data-live][id]');
  }

  // Relative times ("in 4.2s") are drawn here, every second, next to the
  // absolute time the server wrote, so the server's HTML stays the same
  // while the data does and regions are swapped only when it changed.
  function fmtDur(ms) {
    var s = Math.abs(ms) / 1000;
    if (s < 1) return Math.round(Math.abs(ms)) + 'ms';
    if (s < 60) return s.toFixed(1) + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
    if (s < 172800) return Math.floor(s / 3600) + 'h' + String(Math.floor(s % 3600 / 60)).padStart(2, '0') + 'm';
    return Math.floor(s / 86400) + 'd' + String(Math.floor(s % 86400 / 3600)).padStart(2, '0') + 'h';
  }
  function tick(root) {
    var now = Date.now();
    (root || document).querySelectorAll('time[data-ms]').forEach(function (t) {
      var d = Number(t.dataset.ms) - now;
      var rel = t.querySelector('.rel');
      if (!rel) {
        rel = document.createElement('small');
        rel.className = 'rel';
        t.appendChild(rel);
      }
      rel.textContent = ' (' + (d >= 0 ? 'in ' + fmtDur(d) : fmtDur(d) + ' ago') + ')';
    });
  }

  function setLive(ok, why) {
    if (!live) return;
    live.classList.toggle('on', ok);
    live.classList.toggle('off', !ok);
    live.title = ok ? 'live: updated ' + new Date().toLocaleTimeString() : 'not updating: ' + why;
  }

  function apply(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    regions(t.content).forEach(function (fresh) {
      var cur = document.getElementById(fresh.id);
      var h = fresh.outerHTML;
      if (!cur || seen[fresh.id] === h) return;
      seen[fresh.id] = h;
      // What the reader opened stays open.
      var open = {};
      cur.querySelectorAll('details[id]').forEach(function (d) { open[d.id] = d.open; });
      cur.replaceWith(fresh);
      fresh.querySelectorAll('details[id]').forEach(function (d) { if (open[d.id]) d.open = true; });
      tick(fresh);
    });
  }

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(location.href, { headers: { 'X-Delayd-Live': '1' }, cache: 'no-store', credentials: 'same-origin' })
      .then(function (r) {
        if (!r.ok) throw new Error(r.status + ' ' + r.statusText);
        return r.text();
      })
      .then(function (html) { apply(html); setLive(true); })
      .catch(function (e) { setLive(false, e.message); })
      .then(function () { busy = false; });
  }

  function toast(msg, isError) {
    if (!toastEl) return;
    toastEl.textContent = msg;
    toastEl.className = isError ? 'error' : '';
    toastEl.hidden = false;
    clearTimeout(toastEl._t);
    if (!isError) toastEl._t = setTimeout(function () { toastEl.hidden = true; }, 6000);
  }
  if (toastEl) toastEl.addEventListener('click', function () { toastEl.hidden = true; });

  // Every action form asks first, then posts with the header that makes
  // the server answer JSON (the server also refuses cross-site posts).
  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (!f.matches || !f.matches('form[data-confirm]')) return;
    ev.preventDefault();
    if (!window.confirm(f.dataset.confirm)) return;
    var body = new URLSearchParams();
    body.set('confirmed', '1');
    var btn = f.querySelector('button');
    if (btn) btn.disabled = true;
    fetch(f.action, {
      method: 'POST', body: body, credentials: 'same-origin',
      headers: { 'X-Delayd-Action': '1', 'Accept': 'application/json' }
    })
      .then(function (r) { return r.json(); })
      .then(function (j) { toast(j.ok ? j.message : (j.error || 'failed'), !j.ok); })
      .catch(function (e) { toast(String(e), true); })
      .then(function () { if (btn) btn.disabled = false; busy = false; refresh(); });
  });

  regions(document).forEach(function (el) { seen[el.id] = el.outerHTML; });
  tick();
  setLive(true);
  function loop() {
    refresh();
    tick();
    timer = setTimeout(loop, PERIOD);
  }
  timer = setTimeout(loop, PERIOD);
  document.addEventListener('visibilitychange', function () { if (!document.hidden) refresh(); });
})();
