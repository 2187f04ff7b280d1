// E2A Console: plain JavaScript, no build step. Everything from the server
// is rendered with textContent (never innerHTML), so stored payloads cannot
// inject markup.
'use strict';

const KINDS = ['e2a.chunk', 'e2a.complete', 'e2a.error', 'acp.session_update', 'acp.prompt_result',
  'acp.jsonrpc_error', 'a2a.task', 'a2a.message', 'a2a.stream_event', 'ext'];
const STORE_PREFIX = 'e2a.console.frames.';
const STORE_MAX_FRAMES = 2000;
// STORE_MAX_CHARS bounds the raw frames a tab keeps per request
// (sessionStorage holds about 5 million characters per site), and
// STORE_EVERY_MS how often they are written while frames stream in:
// writing them at each frame cost seconds of a blocked page for a request
// with a 1 MB frame (each write copies them all).
const STORE_MAX_CHARS = 2000000;
const STORE_EVERY_MS = 1000;
const POLL_MS = 2000;
// RETRY_MS is how long the page waits before it asks again for a stream
// that could not be opened for a reason that may pass (503, the network).
const RETRY_MS = 3000;
// A stream that egress ends with a retryable error again and again (no
// frame within its wait, each time) is asked for again after twice the
// previous wait, up to RETRY_MAX_MS.
const RETRY_MAX_MS = 60000;

const $ = (id) => document.getElementById(id);

// el builds an element; children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') n.className = v;
    else if (k === 'text') n.textContent = v;
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else if (k.startsWith('data-')) n.setAttribute(k, String(v));
    else n.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

let session = {};

async function api(path, opts = {}) {
  const headers = {'Accept': 'application/json'};
  if (opts.method === 'POST') {
    headers['Content-Type'] = 'application/json';
    headers['X-E2A-Console'] = '1';
  }
  const r = await fetch(path, {credentials: 'same-origin', ...opts, headers});
  const body = await r.json().catch(() => null);
  if (r.status === 401) {
    forgetStored(); // signed out: the next sign-in may be someone else's
    location.reload(); // the server answers the sign-in page
    throw Object.assign(new Error('signed out'), {status: 401});
  }
  if (!r.ok) {
    const e = new Error((body && body.error && body.error.message) || r.statusText);
    e.status = r.status;
    e.retryable = !!(body && body.error && body.error.retryable);
    throw e;
  }
  return body;
}

// ---------- formatting ----------

// pathSegment escapes an id for a URL path. "." and ".." cannot be sent
// in one: the browser resolves them as dot segments, escaped ("%2E%2E")
// too (WHATWG URL), so requestURL puts such a request id in the query.
function pathSegment(id) {
  return encodeURIComponent(id);
}

// requestURL is the console API's URL of request id's detail (suffix
// '') or stream ('/stream').
function requestURL(id, suffix) {
  if (id === '.' || id === '..') return '/console/api/request' + suffix + '?id=' + encodeURIComponent(id);
  return '/console/api/requests/' + pathSegment(id) + suffix;
}

// taskPushURL is the console API's URL of task id's push configs, ending
// in '?' or '&' for the parameters to follow: the task "." or ".." goes in
// the query, as requestURL puts such a request id.
function taskPushURL(id) {
  if (id === '.' || id === '..') return '/console/api/task/push?id=' + encodeURIComponent(id) + '&';
  return '/console/api/tasks/' + pathSegment(id) + '/push?';
}

// Envelopes and frames arrive with their secrets already replaced by the
// server (package redact: the same rule as the normalizer and the logs).
const pretty = (v) => JSON.stringify(v, null, 2);

function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  const now = new Date();
  const t = d.toLocaleTimeString([], {hour12: false}) + '.' + String(d.getMilliseconds()).padStart(3, '0');
  return d.toDateString() === now.toDateString() ? t : d.toLocaleDateString() + ' ' + t;
}

function fmtDuration(ms) {
  if (ms === undefined || ms === null) return '';
  if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(2) + ' s';
  return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}

function fmtNum(v, digits = 1) {
  if (v === undefined || v === null) return '—';
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString();
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

function badge(status) {
  return el('span', {class: 'badge ' + (status || 'pending'), text: status || 'pending'});
}

// ---------- live counters ----------

async function refreshStats() {
  let st;
  try {
    st = await api('/console/api/stats');
  } catch (e) {
    $('stats').replaceChildren(el('p', {class: 'error', text: 'counters unavailable: ' + e.message}));
    return;
  }
  const cards = st.stages.map((s) => el('div', {class: 'stage', 'data-stage': s.stage, title: s.help},
    el('h3', {text: s.stage}),
    el('dl', {},
      el('dt', {text: s.stage === 'index' ? 'msgs/s' : 'req/s'}), el('dd', {'data-k': 'rate', text: fmtNum(s.rate)}),
      el('dt', {text: 'in flight'}), el('dd', {'data-k': 'in_flight', text: fmtNum(s.in_flight, 0)}),
      el('dt', {text: 'lag'}), el('dd', {'data-k': 'lag', text: fmtNum(s.lag, 0)}),
      el('dt', {text: 'errors'}), el('dd', {'data-k': 'errors', class: s.errors > 0 ? 'bad' : '',
        text: fmtNum(s.errors, 0) + (s.error_rate ? ' (' + fmtNum(s.error_rate) + '/s)' : '')}),
      s.frame_rate !== undefined ? [el('dt', {text: 'frames/s'}), el('dd', {text: fmtNum(s.frame_rate)})] : null,
      el('dt', {text: 'total'}), el('dd', {text: fmtNum(s.total, 0)}))));
  const cons = el('div', {class: 'stage consumers'}, el('h3', {text: 'consumers'}),
    el('table', {},
      el('tr', {}, el('th', {text: 'consumer'}), el('th', {class: 'num', text: 'pending'}), el('th', {class: 'num', text: 'acks'}), el('th', {class: 'num', text: 'redeliv.'})),
      st.consumers.map((c) => el('tr', c.no_live_worker ? {class: 'no-worker', 'data-pool': c.pool} : {},
        el('td', {}, el('span', {text: c.name, title: c.stream}),
          c.upstream ? el('span', {class: 'upstream', title: 'bridged upstream of pool ' + c.pool, text: ' → ' + c.upstream}) : null,
          c.no_live_worker ? el('span', {class: 'badge failed', title: 'requests for pool ' + c.pool + ' wait until a worker starts', text: 'no live worker'}) : null),
        el('td', {class: 'num', text: fmtNum(c.pending, 0)}),
        el('td', {class: 'num', text: fmtNum(c.ack_pending, 0)}), el('td', {class: 'num', text: fmtNum(c.redelivered, 0)})))));
  const strm = el('div', {class: 'stage streams'}, el('h3', {text: 'streams'}),
    el('dl', {}, (st.streams || []).map((s) => [el('dt', {text: s.name}), el('dd', {text: fmtNum(s.messages, 0) + ' msgs'})])));
  $('stats').replaceChildren(...cards, cons, strm);
}

// ---------- request list ----------

const list = {cursors: [], before: 0, last: '', query: {}, gen: 0};

function readFilters() {
  const f = $('filters');
  const q = {};
  for (const k of ['request_id', 'task', 'session', 'context', 'user', 'status']) {
    const v = f.elements[k].value.trim();
    if (v) q[k] = v;
  }
  const range = f.elements.range.value;
  if (range === 'custom') {
    if (f.elements.since.value) q.since = new Date(f.elements.since.value).toISOString();
    if (f.elements.until.value) q.until = new Date(f.elements.until.value).toISOString();
  } else if (range) {
    q.since = range;
  }
  return q;
}

async function refreshList() {
  const params = new URLSearchParams(list.query);
  if (list.before) params.set('before', String(list.before));
  params.set('limit', '25');
  // Only the latest call renders: a live refresh sent before a search
  // must not overwrite its answer with the old query's.
  const gen = ++list.gen;
  let page;
  try {
    page = await api('/console/api/requests?' + params);
  } catch (e) {
    if (gen !== list.gen) return;
    $('page-info').textContent = 'list unavailable: ' + e.message;
    if (!list.last) {
      // A new search or page that failed (refused, or unreadable): the
      // rows shown are not its answer. A live refresh keeps them.
      list.page = null;
      $('requests').tBodies[0].replaceChildren();
      $('empty').hidden = true;
      $('older').disabled = true;
    }
    return;
  }
  if (gen !== list.gen) return;
  const sig = JSON.stringify(page);
  if (sig === list.last) return;
  list.last = sig;
  list.page = page;
  const rows = page.entries.map((e) => {
    const tr = el('tr', {class: 'row' + (e.request_id === detail.id ? ' selected' : ''), 'data-id': e.request_id, tabindex: 0},
      el('td', {text: fmtTime(e.time), title: e.time}),
      el('td', {class: 'id', text: e.request_id, title: e.request_id}),
      el('td', {text: e.pool}),
      el('td', {text: e.protocol || ''}),
      el('td', {text: e.method || ''}),
      el('td', {text: e.principal || ''}),
      el('td', {}, badge(e.status), e.error_code ? el('span', {class: 'code', text: e.error_code}) : null, taskLatest(e)),
      el('td', {class: 'num', text: e.frames ? String(e.frames) : ''}),
      el('td', {class: 'num', text: fmtDuration(e.duration_ms)}));
    const open = () => { location.hash = '#/requests/' + encodeURIComponent(e.request_id); };
    tr.addEventListener('click', open);
    tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') open(); });
    return tr;
  });
  $('requests').tBodies[0].replaceChildren(...rows);
  $('empty').hidden = rows.length > 0;
  $('empty').textContent = emptyText();
  $('older').disabled = !page.next;
  $('newer').disabled = list.cursors.length === 0;
  $('page-info').textContent = (page.partial ? 'searched ' + page.scanned + ' index keys — older may match · ' : '') +
    (list.cursors.length ? 'page ' + (list.cursors.length + 1) : 'newest first');
}

// taskLatest links an interrupted turn the client answered to its task's
// newest turn, with that turn's status (the task's state now), or is null.
function taskLatest(e) {
  const l = e.task_latest;
  if (!l) return null;
  return el('a', {class: 'task-latest', href: '#/requests/' + encodeURIComponent(l.request_id),
    title: 'the task went on: its newest turn is ' + l.request_id, onclick: (ev) => ev.stopPropagation()},
  'answered → ', badge(l.status));
}

// FILTER_NAMES are the filters' names as the form labels them.
const FILTER_NAMES = {request_id: 'request id', task: 'task', session: 'session', context: 'context', user: 'user', status: 'status', since: 'since', until: 'until'};

// emptyText says why the list is empty: nothing yet, no older page, or
// nothing matching the filters it names.
function emptyText() {
  const q = Object.entries(list.query);
  if (q.length) {
    const named = q.map(([k, v]) => (FILTER_NAMES[k] || k) + ' ' +
      (/^\d+[smh]$/.test(v) ? 'last ' + v : /^\d{4}-/.test(v) ? fmtTime(v) : '"' + v + '"'));
    return 'No request matches the filters: ' + named.join(', ') + '.';
  }
  if (list.cursors.length) return 'No older requests.';
  return 'No requests yet' + (session.demo ? ': start a demo request above, or send one to the pipeline.' : '.');
}

function search(ev) {
  if (ev) ev.preventDefault();
  list.query = readFilters();
  list.cursors = [];
  list.before = 0;
  list.last = '';
  refreshList();
}

// ---------- one request ----------

// leaving is set once the page is being left (pagehide).
let leaving = false;

const detail = {id: null, es: null, frames: [], chars: 0, last: -1, final: false, ended: false, dups: 0, info: null, renderQueued: false, saveTimer: 0, retryTimer: 0, retries: 0, infoTimer: 0};

// storeKey names the frames of request id kept for the signed-in
// principal: another principal signing in in this tab (the sign-in
// expired, the tab left on the request) is not shown them, whatever the
// server answers it.
function storeKey(id) { return STORE_PREFIX + JSON.stringify([session.principal || '', id]); }

// forgetStored removes every request's frames this tab kept, and stops
// keeping the open one's: signing out leaves no transcript in the tab.
function forgetStored() {
  closeStream();
  clearTimeout(detail.saveTimer);
  detail.saveTimer = 0;
  detail.id = null;
  try {
    for (const k of Object.keys(sessionStorage)) if (k.startsWith(STORE_PREFIX)) sessionStorage.removeItem(k);
  } catch (e) {
    /* no storage */
  }
}

function loadStored(id) {
  try {
    const v = sessionStorage.getItem(storeKey(id));
    return v ? JSON.parse(v) : [];
  } catch (e) {
    return [];
  }
}

function saveStored() {
  clearTimeout(detail.saveTimer);
  detail.saveTimer = 0;
  if (!detail.id) return;
  try {
    if (detail.frames.length > STORE_MAX_FRAMES || detail.chars > STORE_MAX_CHARS) {
      sessionStorage.removeItem(storeKey(detail.id)); // too big: a reload replays from the start
      return;
    }
    sessionStorage.setItem(storeKey(detail.id), JSON.stringify(detail.frames.map((f) => f.raw)));
  } catch (e) {
    /* storage full: a reload replays from the start */
  }
}

// scheduleSave writes the frames once STORE_EVERY_MS has passed (the
// final frame and leaving the page write them at once).
function scheduleSave() {
  if (!detail.saveTimer) detail.saveTimer = setTimeout(saveStored, STORE_EVERY_MS);
}

function setStreamState(text, attrs = {}) {
  const s = $('stream-state');
  s.textContent = text;
  for (const [k, v] of Object.entries(attrs)) s.setAttribute(k, String(v));
}

function closeStream() {
  clearTimeout(detail.retryTimer);
  detail.retryTimer = 0;
  if (detail.es) {
    detail.es.close();
    detail.es = null;
  }
}

function closeDetail() {
  closeStream();
  clearTimeout(detail.infoTimer);
  detail.infoTimer = 0;
  if (detail.saveTimer) saveStored(); // the frames not written yet
  detail.id = null;
  $('detail').hidden = true;
  $('layout').classList.remove('with-detail');
  for (const tr of document.querySelectorAll('tr.row.selected')) tr.classList.remove('selected');
}

// resetDetail shows the detail view, emptied, for request id.
function resetDetail(id) {
  closeStream();
  clearTimeout(detail.infoTimer);
  detail.infoTimer = 0;
  if (detail.saveTimer) saveStored(); // the previous request's frames not written yet
  Object.assign(detail, {id, frames: [], chars: 0, last: -1, final: false, ended: false, dups: 0, info: null, retries: 0});
  $('detail').hidden = false;
  $('layout').classList.add('with-detail');
  for (const tr of document.querySelectorAll('tr.row')) tr.classList.toggle('selected', tr.dataset.id === id);
  $('d-id').textContent = id;
  $('d-id').title = id;
  $('d-status').replaceChildren();
  $('d-summary').replaceChildren();
  $('d-push').hidden = true;
  $('envelope').textContent = '';
  $('frames').replaceChildren();
  $('transcript').replaceChildren();
  $('frame-count').textContent = '0';
  $('replay-cmd').textContent = '';
  setStreamState('', {'data-resumed-from': '', 'data-state': ''});
}

// showMissing says the open request does not exist for this principal
// (the API's 404: unknown, or another's, one answer) and stops asking.
function showMissing(why) {
  closeStream();
  setStreamState('no such request', {'data-state': 'missing'});
  $('transcript').replaceChildren(el('p', {class: 'muted', text: 'No such request: ' + why + '.'}));
}

async function openDetail(id) {
  if (detail.id === id) return;
  resetDetail(id);

  // Frames this tab already showed survive a reload; the stream resumes
  // after them.
  for (const raw of loadStored(id)) {
    let f;
    try { f = JSON.parse(raw); } catch (e) { break; }
    if (f.sequence !== detail.last + 1) break;
    addFrame(f, raw, false);
  }
  renderAll();
  loadInfo(id);
  if (detail.final) {
    setStreamState('complete (kept by this tab)', {'data-state': 'complete'});
    return;
  }
  const from = detail.last + 1;
  if (from > 0) setStreamState('resumed from #' + from, {'data-resumed-from': from, 'data-state': 'resumed'});
  else setStreamState('connecting…', {'data-state': 'connecting'});
  openStream(id, from);
}

// loadInfo shows the summary of request id. An answer worth retrying
// (503 unavailable, 429; no answer at all) is asked for again after
// RETRY_MS, as the stream is, while the request stays open.
async function loadInfo(id) {
  let d;
  try {
    d = await api(requestURL(id, ''));
  } catch (e) {
    if (detail.id !== id) return;
    const again = e.retryable || e.status === undefined;
    $('d-summary').replaceChildren(el('p', {class: 'error', text: e.message + (again ? ' (retrying)' : '')}));
    if (again) {
      clearTimeout(detail.infoTimer);
      detail.infoTimer = setTimeout(() => {
        detail.infoTimer = 0;
        if (detail.id === id) loadInfo(id);
      }, RETRY_MS);
    }
    return;
  }
  if (detail.id !== id) return;
  detail.info = d;
  $('replay-cmd').textContent = d.replay_command;
  $('envelope').textContent = d.envelope ? pretty(d.envelope) : 'E2A_REQUESTS no longer holds this envelope.';
  renderSummary();
  loadPush(id, d.envelope || {});
}

// loadPush shows the push notification configs of the request's task and
// their delivery state (GET /console/api/tasks/{task}/push: the owner's
// only; the webhook's host, never its URL, token or credentials). A reload
// of the same request keeps what the panel shows until the new state is
// in (the summary reloads while the index catches up: emptying the panel
// at each fetch made it flicker).
async function loadPush(id, env) {
  const box = $('d-push');
  const clear = () => { box.hidden = true; box.replaceChildren(); };
  if (box.dataset.request !== id) {
    clear();
    box.dataset.request = id;
  }
  if (!env.task_id) { clear(); return; }
  let p;
  try {
    p = await api(taskPushURL(env.task_id) + 'user=' + encodeURIComponent(env.user_id || ''));
  } catch (e) {
    return; // no push view in this process, or none readable: what is shown stays
  }
  if (detail.id !== id) return;
  if (!p || !p.configs || !p.configs.length) { clear(); return; }
  const rows = p.configs.map((c) => el('tr', {'data-config': c.config_id},
    el('td', {text: c.config_id}), el('td', {text: c.host}),
    el('td', {text: c.last_event || '—'}),
    el('td', {text: pushState(c), title: [c.failing_since, c.next_attempt].filter(Boolean).join(' · ') || null}),
    el('td', {text: String(c.dead_letters)})));
  box.replaceChildren(el('h3', {text: 'Push notifications of task ' + env.task_id}),
    el('table', {class: 'push-table'},
      el('thead', {}, el('tr', {}, ...['config', 'host', 'last update', 'state', 'dead letters'].map((h) => el('th', {text: h})))),
      el('tbody', {}, ...rows)));
  box.hidden = false;
}

// pushState is a config's delivery state in words: the update being
// retried (attempts, since when, the next attempt's time), dead-lettering,
// or ok.
function pushState(c) {
  if (c.attempts) {
    return c.attempts + (c.attempts === 1 ? ' attempt' : ' attempts') +
      (c.failing_since ? ', failing since ' + fmtTime(c.failing_since) : '') +
      (c.next_attempt ? ' · next attempt ' + fmtTime(c.next_attempt) : '');
  }
  return c.dead_letter_mode ? 'dead-lettering' : 'ok';
}

// FINAL_STATUSES are the states of a request whose final frame is written.
const FINAL_STATUSES = ['succeeded', 'failed', 'input-required', 'auth-required'];

// interruptOf returns the state and the question of a frame that ends an
// interrupted turn (a final a2a.stream_event status_update, or a final
// a2a.task, in state input-required or auth-required: as
// e2a.Response.Interrupt reads them), else null.
function interruptOf(f) {
  const b = f.body || {};
  if (!f.is_final) return null;
  let st;
  if (f.response_kind === 'a2a.stream_event' && (b.branch === 'status_update' || b.branch === 'status-update')) {
    st = (b.payload && b.payload.status) || {};
  } else if (f.response_kind === 'a2a.task') {
    st = b.status || {};
  } else {
    return null;
  }
  const state = String(st.state || '').toLowerCase().replace(/^task_state_/, '').replace(/_/g, '-');
  if (state !== 'input-required' && state !== 'auth-required') return null;
  const parts = (st.message && st.message.parts) || [];
  return {state, text: parts.filter((p) => typeof p.text === 'string' && (!p.kind || p.kind === 'text')).map((p) => p.text).join('')};
}

// frameStatus is the state a final frame ends its request in.
function frameStatus(f) {
  if (f.status === 'failed') return 'failed';
  const i = interruptOf(f);
  return i ? i.state : 'succeeded';
}

// pollFinalInfo reloads the summary until the index has the final state
// (it trails the stream by up to a fetch batch).
async function pollFinalInfo(id, tries) {
  for (let i = 0; i < tries && detail.id === id; i++) {
    await new Promise((r) => setTimeout(r, 600));
    await loadInfo(id);
    const e = detail.info && detail.info.entry;
    if (e && FINAL_STATUSES.includes(e.status)) return;
  }
}

function renderSummary() {
  const d = detail.info;
  if (!d) return;
  const e = d.entry || {};
  const env = d.envelope || {};
  let status = e.status || (detail.frames.length ? 'running' : 'pending');
  const lastFrame = detail.frames[detail.frames.length - 1];
  if (detail.final && lastFrame) status = frameStatus(lastFrame.f);
  $('d-status').replaceChildren(badge(status));
  const rows = [
    ['time', fmtTime(e.time || env.timestamp)],
    ['pool', e.pool],
    ['protocol', e.protocol || (env.provenance && env.provenance.source_protocol)],
    ['method', e.method || env.method],
    ['principal', e.principal || env.user_id],
    ['task', e.task_id || env.task_id],
    ['session', e.session_id || env.session_id],
    ['context', e.context_id || env.context_id],
    ['frames', detail.frames.length ? String(detail.frames.length) : e.frames],
    ['duration', fmtDuration(e.duration_ms)],
  ].filter(([, v]) => v !== undefined && v !== null && v !== '');
  const dl = rows.flatMap(([k, v]) => [el('dt', {text: k}), el('dd', {text: String(v)})]);
  if (e.task_latest) dl.push(el('dt', {text: 'task now'}), el('dd', {}, taskLatest(e)));
  $('d-summary').replaceChildren(...dl);
}

function streamURL(id, from) {
  const u = requestURL(id, '/stream');
  return from > 0 ? u + (u.includes('?') ? '&' : '?') + 'from=' + from : u;
}

function openStream(id, from) {
  const es = new EventSource(streamURL(id, from));
  detail.es = es;
  const onFrame = (ev) => {
    if (detail.es !== es) return;
    let f;
    try { f = JSON.parse(ev.data); } catch (e) { return; }
    if (typeof f.sequence !== 'number') return;
    if (f.sequence <= detail.last) { // a resumed stream never repeats; count it if it did
      detail.dups++;
      $('frames').dataset.duplicates = String(detail.dups);
      return;
    }
    if (f.sequence !== detail.last + 1) { // never expected: read the missing frames again
      closeStream();
      openStream(id, detail.last + 1);
      return;
    }
    addFrame(f, ev.data, true);
    detail.retries = 0;
    if (f.is_final) saveStored();
    else scheduleSave();
    scheduleRender();
    const st = $('stream-state');
    if (f.is_final) {
      closeStream();
      setStreamState((st.dataset.resumedFrom ? 'resumed from #' + st.dataset.resumedFrom + ' · ' : '') + 'complete', {'data-state': 'complete'});
      pollFinalInfo(id, 8);
      setTimeout(refreshList, 700);
    } else if (st.dataset.state !== 'live') {
      setStreamState((st.dataset.resumedFrom ? 'resumed from #' + st.dataset.resumedFrom + ' · ' : '') + 'live', {'data-state': 'live'});
    }
  };
  for (const k of KINDS) es.addEventListener(k, onFrame);
  es.addEventListener('open', () => {
    if (detail.es === es && $('stream-state').dataset.state === 'connecting') setStreamState('waiting for frames…', {'data-state': 'waiting'});
  });
  es.addEventListener('error', (ev) => {
    if (detail.es !== es) return;
    if (ev.data) { // an error event written by egress: the stream ended without a final frame
      let msg = ev.data;
      let retryable = false;
      try {
        const b = JSON.parse(ev.data);
        msg = (b.error && (b.error.code + ': ' + b.error.message)) || msg;
        retryable = !!(b.error && b.error.retryable);
      } catch (e) { /* raw */ }
      closeStream();
      if (retryable) { // no frame within egress's wait (a pool without a worker yet), unavailable: the frames may come
        setStreamState('stream ended: ' + msg + ' (retrying)', {'data-state': 'error'});
        retryLater(id, Math.min(RETRY_MS * 2 ** detail.retries++, RETRY_MAX_MS));
        return;
      }
      detail.ended = true;
      scheduleRender();
      setStreamState('stream ended: ' + msg, {'data-state': 'error'});
      return;
    }
    if (es.readyState === EventSource.CLOSED) {
      closeStream();
      streamRefused(id);
    } else {
      setStreamState('reconnecting…', {'data-state': 'reconnecting'}); // the browser resumes with Last-Event-ID
    }
  });
}

// streamRefused learns why the stream of request id could not be opened
// (an EventSource does not tell the status): the stream is asked again
// and the answer's status read, and the error of a refusal (a 200's body,
// the stream, is left unread). A 404 (no such request, or another
// principal's: one answer) ends the tries, and so does a client error
// that is not retryable (410 frames_expired: the request's frames are no
// longer held), said as such; any other answer (503, the network) is
// tried again after RETRY_MS. A page being left (its streams closed by
// the browser) asks nothing.
async function streamRefused(id) {
  if (leaving) return;
  const ac = new AbortController();
  let status = 0;
  let err = null;
  try {
    const r = await fetch(streamURL(id, detail.last + 1), {credentials: 'same-origin', headers: {'Accept': 'text/event-stream'}, signal: ac.signal});
    status = r.status;
    if (status >= 400 && status < 500) err = ((await r.json().catch(() => null)) || {}).error || null;
  } catch (e) {
    /* the network: try again */
  }
  ac.abort();
  if (detail.id !== id || detail.es) return;
  if (status === 401) {
    forgetStored();
    location.reload();
    return;
  }
  if (status === 404) {
    showMissing('unknown, or not visible to this sign-in');
    return;
  }
  if (err && err.retryable === false) {
    detail.ended = true;
    scheduleRender();
    setStreamState('not available: ' + err.code + ': ' + err.message, {'data-state': 'error'});
    return;
  }
  setStreamState('not available (retrying)', {'data-state': 'error'});
  retryLater(id, RETRY_MS);
}

// retryLater opens the stream of request id again, after the frames the
// page has, once wait (ms) has passed (unless the page has moved on).
function retryLater(id, wait) {
  clearTimeout(detail.retryTimer);
  detail.retryTimer = setTimeout(() => {
    detail.retryTimer = 0;
    if (detail.id === id && !detail.es && !detail.final) openStream(id, detail.last + 1);
  }, wait);
}

function addFrame(f, raw, live) {
  detail.frames.push({f, raw, live});
  detail.chars += raw.length;
  detail.last = f.sequence;
  if (f.is_final) detail.final = true;
}

function scheduleRender() {
  if (detail.renderQueued) return;
  detail.renderQueued = true;
  requestAnimationFrame(() => { detail.renderQueued = false; renderAll(); });
}

function renderAll() {
  renderFrames();
  renderTranscript();
  renderSummary();
}

// renderFrames appends the frames not shown yet, one item each.
function renderFrames() {
  const ol = $('frames');
  for (let i = ol.children.length; i < detail.frames.length; i++) ol.append(frameItem(detail.frames[i].f));
  $('frame-count').textContent = String(detail.frames.length);
}

function toolText(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

// toolValue is a tool call's arguments or result as the transcript shows
// them: JSON text of an object or array (the trpc interaction spec's
// "args":"{\"city\":\"Beijing\"}", OpenAI's function arguments) as the
// value it holds, anything else as it is.
function toolValue(v) {
  if (typeof v !== 'string' || !/^\s*[[{]/.test(v)) return v;
  try {
    return JSON.parse(v);
  } catch (e) {
    return v;
  }
}

function frameBody(f) {
  const b = f.body || {};
  switch (f.response_kind) {
    case 'e2a.chunk': {
      const d = b.delta;
      switch (b.delta_kind) {
        case 'text': return el('div', {class: 'delta text', text: String(d)});
        case 'reasoning': return el('div', {class: 'delta reasoning', text: String(d)});
        case 'tool':
          if (d && d.type === 'function_response') {
            return el('div', {class: 'delta tool result'}, el('span', {class: 'arrow', text: '←'}), el('b', {text: d.name || d.id}), ' ', el('code', {text: toolText(d.response)}));
          }
          return el('div', {class: 'delta tool call'}, el('span', {class: 'arrow', text: '→'}), el('b', {text: (d && (d.name || d.id)) || 'tool'}), el('code', {text: '(' + toolText(d && d.args) + ')'}));
        default: return el('div', {class: 'delta custom'}, el('code', {text: toolText(d)}));
      }
    }
    case 'e2a.complete': return el('div', {class: 'complete'}, el('b', {text: 'complete '}), el('code', {text: toolText(b.result)}));
    case 'e2a.error': return errorBox(b);
    default: return el('div', {class: 'other'}, el('code', {text: toolText(b)}));
  }
}

function errorBox(b) {
  return el('div', {class: 'errorbox'}, el('b', {text: b.code || 'error'}), ' ', b.message || '',
    el('span', {class: 'muted', text: b.retryable ? ' (retryable)' : ' (not retryable)'}));
}

function frameItem(f) {
  const raw = el('pre', {class: 'json raw', hidden: true});
  const toggle = el('button', {type: 'button', class: 'link raw-toggle', text: 'raw'});
  toggle.addEventListener('click', () => {
    if (!raw.textContent) raw.textContent = pretty(f);
    raw.hidden = !raw.hidden;
    toggle.textContent = raw.hidden ? 'raw' : 'hide raw';
  });
  return el('li', {class: 'frame k-' + f.response_kind.replace(/\W/g, '-'), 'data-seq': f.sequence, 'data-kind': f.response_kind, 'data-final': f.is_final ? 'true' : 'false'},
    el('div', {class: 'fhead'},
      el('span', {class: 'seq', text: '#' + f.sequence}),
      el('span', {class: 'kind', text: f.response_kind + (f.body && f.body.delta_kind ? ' · ' + f.body.delta_kind : '')}),
      f.is_final ? badge(frameStatus(f)) : null,
      el('span', {class: 'time muted', text: fmtTime(f.timestamp)}),
      toggle),
    frameBody(f), raw);
}

// renderTranscript shows the request as a conversation: reasoning, tool
// calls with their arguments and results (joined by call id), the text,
// and how it ended.
function renderTranscript() {
  const reasoning = [];
  const tools = new Map();
  let text = '';
  let end = null;
  const other = [];
  for (const {f} of detail.frames) {
    const b = f.body || {};
    if (f.response_kind === 'e2a.chunk') {
      if (b.delta_kind === 'text') text += String(b.delta);
      else if (b.delta_kind === 'reasoning') reasoning.push(String(b.delta));
      else if (b.delta_kind === 'tool' && b.delta) {
        const id = b.delta.id || b.delta.name || String(tools.size);
        const t = tools.get(id) || {name: b.delta.name, id};
        if (b.delta.type === 'function_response') t.result = b.delta.response;
        else t.args = b.delta.args;
        t.name = t.name || b.delta.name;
        tools.set(id, t);
      } else other.push(f);
    } else if (f.response_kind === 'e2a.complete' || f.response_kind === 'e2a.error' || interruptOf(f)) {
      end = f;
    } else {
      other.push(f);
    }
  }
  const parts = [];
  if (reasoning.length) parts.push(el('section', {class: 't-reasoning'}, el('h4', {text: 'Reasoning'}), el('p', {text: reasoning.join('')})));
  for (const t of tools.values()) {
    parts.push(el('section', {class: 't-tool', 'data-tool': t.name || ''},
      el('h4', {}, 'Tool call ', el('code', {text: t.name || '?'}), el('span', {class: 'muted', text: ' ' + (t.id || '')})),
      el('div', {class: 'kv'}, el('span', {text: 'arguments'}), el('pre', {class: 'json', text: pretty(t.args === undefined ? null : toolValue(t.args))})),
      el('div', {class: 'kv'}, el('span', {text: 'result'}), t.result === undefined
        ? el('em', {class: 'muted no-result', text: detail.final || detail.ended ? 'no result: the request ended' : 'waiting…'})
        : el('pre', {class: 'json', text: pretty(toolValue(t.result))}))));
  }
  if (text) parts.push(el('section', {class: 't-text'}, el('h4', {text: 'Answer'}), el('p', {class: 'answer', text: text})));
  for (const f of other) parts.push(el('section', {class: 't-other'}, el('h4', {text: f.response_kind}), el('pre', {class: 'json', text: pretty(f.body)})));
  const asked = end && interruptOf(end);
  if (asked) parts.push(el('section', {class: 't-interrupt', 'data-state': asked.state},
    el('h4', {text: asked.state === 'auth-required' ? 'Authorization required' : 'Input required'}), el('p', {class: 'question', text: asked.text})));
  else if (end && end.response_kind === 'e2a.error') parts.push(el('section', {class: 't-error'}, el('h4', {text: 'Failed'}), errorBox(end.body || {})));
  else if (end) parts.push(el('section', {class: 't-complete'}, el('h4', {text: 'Completed'}), el('pre', {class: 'json', text: pretty(end.body && end.body.result)})));
  else if (detail.frames.length) parts.push(el('p', {class: 'muted typing', text: 'streaming…'}));
  else parts.push(el('p', {class: 'muted', text: detail.ended ? 'no frame to show' : 'no frame yet'}));
  $('transcript').replaceChildren(...parts);
}

// ---------- wiring ----------

function route() {
  const m = location.hash.match(/^#\/requests\/(.+)$/);
  if (!m) {
    closeDetail();
    return;
  }
  let id;
  try {
    id = decodeURIComponent(m[1]);
  } catch (e) { // not UTF-8 percent-encoded: no request has that id
    resetDetail(m[1]);
    detail.id = null; // nothing to load, keep or poll
    showMissing('the address does not name a request id');
    return;
  }
  openDetail(id);
}

async function startDemo(ev) {
  ev.preventDefault();
  const f = $('demo');
  const btn = $('start-demo');
  btn.disabled = true;
  try {
    const r = await api('/console/api/demo', {method: 'POST', body: JSON.stringify({
      text: f.elements.text.value, frames: Number(f.elements.frames.value), delay_ms: Number(f.elements.delay_ms.value)})});
    location.hash = '#/requests/' + encodeURIComponent(r.request_id);
    setTimeout(refreshList, 300);
  } catch (e) {
    alert('demo request failed: ' + e.message);
  } finally {
    btn.disabled = false;
  }
}

async function copyReplay() {
  const text = $('replay-cmd').textContent;
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {
    const r = document.createRange();
    r.selectNodeContents($('replay-cmd'));
    const sel = getSelection();
    sel.removeAllRanges();
    sel.addRange(r);
    document.execCommand('copy');
  }
  $('copy-replay').textContent = 'Copied';
  setTimeout(() => { $('copy-replay').textContent = 'Copy'; }, 1500);
}

function selectTab(name) {
  for (const b of document.querySelectorAll('.tabs button')) b.classList.toggle('active', b.dataset.tab === name);
  for (const t of ['transcript', 'frames', 'envelope']) $('tab-' + t).hidden = t !== name;
}

async function init() {
  try {
    session = await api('/console/api/session');
  } catch (e) {
    $('stats').replaceChildren(el('p', {class: 'error', text: 'console unavailable: ' + e.message}));
    return;
  }
  const who = $('who');
  if (session.auth_required && !session.signed_in) {
    // Optional auth: a visitor without a credential is the anonymous
    // principal; a person with one signs in on the form.
    who.replaceChildren('not signed in (', el('b', {text: session.principal || '?'}), ') · ',
      el('a', {href: '/console/login', text: 'sign in'}));
  } else if (session.auth_required) {
    const out = el('button', {type: 'button', class: 'link', text: 'sign out'});
    out.addEventListener('click', async () => {
      forgetStored();
      await api('/console/api/logout', {method: 'POST', body: '{}'});
      location.reload();
    });
    who.replaceChildren('signed in as ', el('b', {text: session.principal || '?'}), ' · ', out);
  } else {
    who.textContent = 'no auth configured';
  }
  if (session.demo) {
    $('demo').hidden = false;
    $('demo').addEventListener('submit', startDemo);
  }
  $('filters').addEventListener('submit', search);
  $('filters').elements.range.addEventListener('change', (ev) => {
    document.body.classList.toggle('custom-range-on', ev.target.value === 'custom');
  });
  $('clear-filters').addEventListener('click', () => { $('filters').reset(); document.body.classList.remove('custom-range-on'); search(); });
  $('older').addEventListener('click', () => {
    if (!list.page || !list.page.next) return;
    list.cursors.push(list.before);
    list.before = list.page.next;
    list.last = '';
    refreshList();
  });
  $('newer').addEventListener('click', () => {
    list.before = list.cursors.pop() || 0;
    list.last = '';
    refreshList();
  });
  $('close-detail').addEventListener('click', () => { location.hash = '#/'; });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && !ev.defaultPrevented && !$('detail').hidden) location.hash = '#/';
  });
  $('copy-replay').addEventListener('click', copyReplay);
  for (const b of document.querySelectorAll('.tabs button')) b.addEventListener('click', () => selectTab(b.dataset.tab));
  window.addEventListener('hashchange', route);
  window.addEventListener('pagehide', () => {
    leaving = true;
    if (detail.saveTimer) saveStored(); // a reload resumes after every frame shown
  });
  window.addEventListener('pageshow', () => { leaving = false; }); // back from the browser's page cache
  route();
  // The counters are the deployment's: shown to the audit and admin roles
  // (and to everyone without auth) only.
  $('stats').hidden = !session.stats;
  if (session.stats) {
    refreshStats();
    setInterval(() => { if (document.visibilityState === 'visible') refreshStats(); }, POLL_MS);
  }
  refreshList();
  setInterval(() => {
    if (document.visibilityState === 'visible' && $('auto').checked && list.cursors.length === 0) refreshList();
  }, POLL_MS);
}

document.addEventListener('DOMContentLoaded', init);
