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

  // What the reader typed or ticked in a region (a selection, a delay)
  // survives the region being swapped for a fresh one.
  function inputState(root) {
    var st = {};
    root.querySelectorAll('input[name]').forEach(function (i) {
      var k = (i.getAttribute('form') || '') + '|' + i.name + '|' + (i.type === 'checkbox' ? i.value : '');
      st[k] = i.type === 'checkbox' ? i.checked : i.value;
    });
    return st;
  }
  function restoreInputs(root, st) {
    root.querySelectorAll('input[name]').forEach(function (i) {
      var k = (i.getAttribute('form') || '') + '|' + i.name + '|' + (i.type === 'checkbox' ? i.value : '');
      if (!(k in st)) return;
      if (i.type === 'checkbox') i.checked = st[k];
      else i.value = st[k];
    });
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
      var inputs = inputState(cur);
      var focused = document.activeElement && cur.contains(document.activeElement) ? document.activeElement.name : '';
      cur.replaceWith(fresh);
      fresh.querySelectorAll('details[id]').forEach(function (d) { if (open[d.id]) d.open = true; });
      restoreInputs(fresh, inputs);
      if (focused) {
        var f = fresh.querySelector('input[name="' + focused + '"]:not([type=checkbox])');
        if (f) f.focus();
      }
      counts(fresh);
      tick(fresh);
    });
  }

  // A selection's count, and its select-all box, follow the boxes ticked.
  function boxes(formId) {
    return document.querySelectorAll('input[type=checkbox][name=ids][form="' + formId + '"]');
  }
  function counts(root) {
    (root || document).querySelectorAll('form[data-bulk]').forEach(function (f) {
      var all = boxes(f.id), n = 0;
      all.forEach(function (b) { if (b.checked) n++; });
      var out = f.querySelector('[data-k=selected]');
      if (out) out.textContent = String(n);
      var head = document.querySelector('input[data-all="' + f.id + '"]');
      if (head) { head.checked = n > 0 && n === all.length; head.indeterminate = n > 0 && n < all.length; }
    });
  }
  document.addEventListener('change', function (ev) {
    var el = ev.target;
    if (el.dataset && el.dataset.all) boxes(el.dataset.all).forEach(function (b) { b.checked = el.checked; });
    if (el.type === 'checkbox') counts();
  });

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
  // the server answer JSON (the server also refuses cross-site posts). A
  // selection's form posts the boxes ticked and the button pressed.
  document.addEventListener('submit', function (ev) {
    var f = ev.target;
    if (!f.matches) return;
    var btn = ev.submitter || f.querySelector('button');
    var ask;
    if (f.matches('form[data-bulk]')) {
      var n = 0;
      boxes(f.id).forEach(function (b) { if (b.checked) n++; });
      ev.preventDefault();
      if (n === 0) { toast('Select jobs first: tick their boxes.', true); return; }
      ask = (btn && btn.dataset.confirm || '').replace('{n}', String(n));
    } else if (f.matches('form[data-confirm]')) {
      ev.preventDefault();
      ask = f.dataset.confirm;
    } else {
      return;
    }
    if (!window.confirm(ask)) return;
    var body = new URLSearchParams(new FormData(f, btn && btn.name ? btn : null));
    body.set('confirmed', '1');
    if (btn) btn.disabled = true;
    fetch(f.action, {
      method: 'POST', body: body, credentials: 'same-origin',
      headers: { 'X-Delayd-Action': '1', 'Accept': 'application/json' }
    })
      .then(function (r) { return r.json(); })
      .then(function (j) {
        toast(j.ok ? j.message : (j.error || 'failed'), !j.ok);
        if (j.ok && f.matches('form[data-bulk]')) boxes(f.id).forEach(function (b) { b.checked = false; });
      })
      .catch(function (e) { toast(String(e), true); })
      .then(function () { if (btn) btn.disabled = false; busy = false; counts(); refresh(); });
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
