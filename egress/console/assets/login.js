'use strict';
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
    if (!r.ok) throw new Error((body && body.error && body.error.message) || r.statusText);
    location.reload();
  } catch (e) {
    err.textContent = 'Sign-in failed: ' + e.message;
    err.hidden = false;
  } finally {
    f.secret.value = '';
  }
});
