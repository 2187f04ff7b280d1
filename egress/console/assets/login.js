'use strict';

// retryAfter words the wait a refused sign-in's Retry-After gives (in
// seconds, or as an HTTP date), or is empty.
function retryAfter(r) {
  const v = r.headers.get('Retry-After');
  if (!v) return '';
  let secs = /^\d+$/.test(v.trim()) ? Number(v) : Math.ceil((Date.parse(v) - Date.now()) / 1000);
  if (!(secs > 0)) return '';
  secs = Math.max(1, secs);
  return ' (try again in ' + secs + (secs === 1 ? ' second)' : ' seconds)');
}
document.getElementById('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  const err = document.getElementById('login-error');
  err.hidden = true;
  try {
    const r = await fetch('/console/api/login', {
      method: 'POST',
      credentials: 'same-origin',
      headers: {'Content-Type': 'application/json', 'X-E2A-Console': '1'},
      body: JSON.stringify({scheme: f.scheme.value, secret: f.secret.value}),
    });
    const body = await r.json().catch(() => null);
    if (!r.ok) {
      const wait = retryAfter(r);
      let msg = (body && body.error && body.error.message) || r.statusText;
      if (wait) msg = msg.replace(/;? *retry in \d+ s$/, ''); // said once, in words
      throw new Error(msg + wait);
    }
    // The form at /console/login leads to the console; the one /console
    // answered in its place shows it once reloaded.
    if (location.pathname === '/console/login') location.replace('/console');
    else location.reload();
  } catch (e) {
    err.textContent = 'Sign-in failed: ' + e.message;
    err.hidden = false;
  } finally {
    f.secret.value = '';
  }
});
