// keyfire dashboard: vanilla JavaScript over the REST API (/v1), no build step.
//
// Every element is built with createElement and every piece of data goes in as text
// (textContent, text nodes, attribute values we compose ourselves): job ids, params, handler
// errors and node ids can hold anything, and none of it is ever parsed as HTML.
'use strict';

(() => {
  const TOKEN_KEY = 'keyfire.token';
  const SAMPLES_KEY = 'keyfire.samples';
  const REFRESH_MS = 5000;
  const PAGE_SIZE = 100;

  const state = {
    auth: false,      // the node wants a token (from /ui/config.json)
    seq: 0,           // bumped on every navigation: late answers for an old page are dropped
    timer: null,      // auto-refresh of the current page
    refresh: null,    // re-render of the current page
  };

  // ---- DOM helpers -------------------------------------------------------------------------

  const $ = (sel) => document.querySelector(sel);

  /** h('td', {class: 'num', title: x}, 'text', node, [more]) -> element. Strings become text. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    add(el, children);
    return el;
  }

  function add(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : String(c)); // append(string) inserts a text node
    }
    return el;
  }

  /** A link to a page of this dashboard: the href is composed here, never taken from data. */
  function link(path, ...children) {
    return h('a', { href: '#' + path.map(encodeURIComponent).join('/') }, ...children);
  }

  function jobLink(id) {
    return h('a', { href: '#/job/' + encodeURIComponent(id), class: 'mono' }, id);
  }

  function badge(text, kind) {
    return h('span', { class: 'badge ' + (kind || text) }, text);
  }

  function show(...children) {
    const app = $('#app');
    app.replaceChildren();
    add(app, children);
  }

  function empty(text) {
    return h('div', { class: 'empty' }, text);
  }

  function banner(text, kind) {
    const b = $('#banner');
    $('#banner-text').textContent = text;
    b.className = 'banner' + (kind === 'error' ? ' error' : '');
    b.hidden = false;
  }

  function clearBanner() {
    $('#banner').hidden = true;
  }

  // ---- formatting ---------------------------------------------------------------------------

  const numberFormat = new Intl.NumberFormat('en');
  const fmtNum = (n) => (n === null || n === undefined ? '–' : numberFormat.format(n));
  /** A fraction from 0 to 1 as a percentage with `digits` decimals (or '–'). */
  const fmtPct = (x, digits) => (typeof x !== 'number' || !Number.isFinite(x) ? '–' : (x * 100).toFixed(digits) + '%');

  /** "2026-11-22 09:00:00Z" from an RFC 3339 string (or '–'). */
  function fmtTime(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }

  /** "2026-03-09 09:00:00 +01:00" from an RFC 3339 string with an offset. */
  function fmtLocal(s) {
    return String(s).replace('T', ' ').replace(/\.\d+/, '').replace(/(Z|[+-]\d\d:\d\d)$/,
      (m) => ' ' + (m === 'Z' ? '+00:00' : m));
  }

  function fmtSpan(ms) {
    const a = Math.abs(ms);
    if (a < 1000) return Math.round(a) + ' ms';
    if (a < 60e3) return (a / 1000).toFixed(a < 10e3 ? 1 : 0) + ' s';
    if (a < 3600e3) return Math.round(a / 60e3) + ' min';
    if (a < 86400e3) return (a / 3600e3).toFixed(1) + ' h';
    return (a / 86400e3).toFixed(1) + ' d';
  }

  function fmtRel(iso) {
    if (!iso) return '';
    const diff = new Date(iso).getTime() - Date.now();
    if (Number.isNaN(diff)) return '';
    return diff >= 0 ? 'in ' + fmtSpan(diff) : fmtSpan(diff) + ' ago';
  }

  /** A time cell: UTC, with the relative time beside it. */
  function timeCell(iso, extraTitle) {
    if (!iso) return h('td', { class: 'muted' }, '–');
    return h('td', { title: extraTitle || iso },
      fmtTime(iso), ' ', h('span', { class: 'muted' }, fmtRel(iso)));
  }

  function schedule(spec) {
    if (!spec) return '–';
    if (spec.cron) return 'cron ' + spec.cron + (spec.tz ? ' (' + spec.tz + ')' : '');
    if (spec.every) return 'every ' + spec.every;
    if (spec.at) return 'once at ' + fmtTime(spec.at);
    if (spec.after) return 'once after ' + spec.after;
    return '–';
  }

  /** How long a run took. Its start is the node's estimate of Redis time and its end is
   * Redis's own clock, so a very short run can come out a millisecond negative: shown as <1 ms. */
  function duration(from, to) {
    if (!from || !to) return '–';
    const ms = new Date(to).getTime() - new Date(from).getTime();
    if (Number.isNaN(ms)) return '–';
    return ms < 1 ? '<1 ms' : fmtSpan(ms);
  }

  // ---- the API ------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, field) {
      super(message);
      this.status = status;
      this.code = code;
      this.field = field;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  /** Call the API; the answer's JSON, or an ApiError with the API's own message. */
  async function api(method, path, query) {
    let url = path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
      }
      const s = q.toString();
      if (s) url += '?' + s;
    }
    const headers = { Accept: 'application/json' };
    if (token()) headers.Authorization = 'Bearer ' + token();
    let res;
    try {
      res = await fetch(url, { method, headers, cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new ApiError(0, 'network', 'cannot reach the node (' + e.message + ')');
    }
    const text = await res.text();
    let body = null;
    if (text) {
      try { body = JSON.parse(text); } catch (e) { body = null; }
    }
    if (!res.ok) {
      const err = (body && body.error) || {};
      throw new ApiError(res.status, err.code || 'http_' + res.status,
        err.message || res.status + ' ' + res.statusText, err.field);
    }
    return body;
  }

  const jobPath = (id, rest) => '/v1/jobs/' + encodeURIComponent(id) + (rest || '');

  // ---- confirmation dialog ------------------------------------------------------------------

  /** Ask before acting; resolves true on Confirm, false on Cancel or Escape. */
  function confirmAction(title, text, okLabel) {
    const dialog = $('#confirm');
    const ok = $('#confirm-ok');
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    ok.textContent = okLabel;
    // Red for what cannot be undone.
    ok.className = /^(Delete|Purge)/.test(okLabel) ? 'danger' : 'confirm-plain';
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal();
      $('#confirm-cancel').focus();
    });
  }

  /** Confirm, call, report: `act` returns the message to show. */
  async function act(title, text, okLabel, call) {
    if (!(await confirmAction(title, text, okLabel))) return false;
    try {
      const message = await call();
      banner(message);
      return true;
    } catch (e) {
      banner(title + ' failed: ' + e.message, 'error');
      if (e.status === 401) route();
      return false;
    }
  }

  // ---- job actions --------------------------------------------------------------------------

  function jobActions(job, after) {
    const buttons = [];
    if (job.status === 'active') {
      buttons.push(h('button', {
        type: 'button', class: 'small', onclick: async () => {
          let updated = null;
          const done = await act('Pause job', 'Pause "' + job.id + '"? It keeps its definition and fires nothing until resumed.', 'Pause',
            async () => { updated = await api('POST', jobPath(job.id, '/pause')); return 'Paused "' + job.id + '".'; });
          if (done) after(updated);
        },
      }, 'Pause'));
    }
    if (job.status === 'paused') {
      buttons.push(h('button', {
        type: 'button', class: 'small', onclick: async () => {
          let updated = null;
          const done = await act('Resume job', 'Resume "' + job.id + '"? Its misfire policy decides what the pause skipped.', 'Resume',
            async () => { updated = await api('POST', jobPath(job.id, '/resume')); return 'Resumed "' + job.id + '".'; });
          if (done) after(updated);
        },
      }, 'Resume'));
    }
    buttons.push(h('button', {
      type: 'button', class: 'small', onclick: async () => {
        const done = await act('Trigger job', 'Run "' + job.id + '" once now, without moving its schedule?', 'Trigger',
          async () => {
            const t = await api('POST', jobPath(job.id, '/trigger'));
            return 'Triggered "' + job.id + '": firing ' + t.firing_id + '.';
          });
        if (done) after(null);
      },
    }, 'Trigger'));
    buttons.push(h('button', {
      type: 'button', class: 'small danger', onclick: async () => {
        const done = await act('Delete job', 'Delete "' + job.id + '", its pending firing and its history? This cannot be undone.', 'Delete',
          async () => { await api('DELETE', jobPath(job.id)); return 'Deleted "' + job.id + '".'; });
        if (done) after('deleted');
      },
    }, 'Delete'));
    return buttons;
  }

  // ---- overview -----------------------------------------------------------------------------

  function loadSamples() {
    try { return JSON.parse(sessionStorage.getItem(SAMPLES_KEY)) || []; } catch (e) { return []; }
  }

  /** Keep (time, runs, failures) samples of the cluster's counters for ten minutes. */
  function addSample(o) {
    const t = Date.now();
    let samples = loadSamples().filter((s) => t - s.t < 600e3);
    const last = samples[samples.length - 1];
    // A deleted job takes its counters with it: start over rather than show a negative rate.
    if (last && (o.totals.runs < last.runs || o.totals.failures < last.failures)) samples = [];
    samples.push({ t, runs: o.totals.runs, failures: o.totals.failures });
    sessionStorage.setItem(SAMPLES_KEY, JSON.stringify(samples));
    return samples;
  }

  /** Per-minute rate of a counter over the last minute of samples (null until 4 s of data). */
  function perMinute(samples, key) {
    if (samples.length < 2) return null;
    const last = samples[samples.length - 1];
    const first = samples.find((s) => last.t - s.t <= 60e3) || samples[0];
    const dt = last.t - first.t;
    if (dt < 4000) return null;
    return ((last[key] - first[key]) * 60e3) / dt;
  }

  /** Bars of runs per minute between consecutive samples, newest right. */
  function sparkline(samples) {
    const ns = 'http://www.w3.org/2000/svg';
    const rates = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = samples[i].t - samples[i - 1].t;
      if (dt > 0) rates.push(((samples[i].runs - samples[i - 1].runs) * 60e3) / dt);
    }
    const w = 150; const hgt = 28; const n = 30;
    const shown = rates.slice(-n);
    const max = Math.max(1, ...shown);
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('class', 'spark');
    svg.setAttribute('width', String(w));
    svg.setAttribute('height', String(hgt));
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + hgt);
    svg.setAttribute('aria-hidden', 'true');
    const bw = w / n;
    shown.forEach((r, i) => {
      const rect = document.createElementNS(ns, 'rect');
      const bh = Math.max(1, (r / max) * hgt);
      rect.setAttribute('x', String(w - (shown.length - i) * bw));
      rect.setAttribute('y', String(hgt - bh));
      rect.setAttribute('width', String(Math.max(1, bw - 1)));
      rect.setAttribute('height', String(bh));
      svg.append(rect);
    });
    return svg;
  }

  function card(label, value, sub, opts) {
    const o = opts || {};
    const body = [h('div', { class: 'label' }, label), h('div', { class: 'value' }, value)];
    if (sub) body.push(h('div', { class: 'sub' }, sub));
    if (o.extra) body.push(o.extra);
    const inner = o.href ? h('a', { href: o.href }, body) : body;
    return h('div', { class: 'card' + (o.bad ? ' bad' : ''), dataset: { card: o.key || label } }, inner);
  }

  async function pageOverview(seq) {
    const o = await api('GET', '/v1/overview');
    if (seq !== state.seq) return;
    const samples = addSample(o);
    const rate = perMinute(samples, 'runs');
    const failRate = perMinute(samples, 'failures');
    const rateText = rate === null ? '–' : rate.toFixed(rate < 10 ? 1 : 0);
    const j = o.jobs;
    const cards = h('div', { class: 'cards' },
      card('Live nodes', fmtNum(o.nodes.length), null, { key: 'nodes', bad: o.nodes.length === 0 }),
      card('Jobs', fmtNum(j.total),
        fmtNum(j.active) + ' active · ' + fmtNum(j.paused) + ' paused · ' + fmtNum(j.finished) + ' finished',
        { key: 'jobs', href: '#/jobs' }),
      card('Firings / min', rateText,
        rate === null ? 'measuring, a few seconds…'
          : 'failures / min: ' + failRate.toFixed(failRate < 10 ? 1 : 0),
        { key: 'rate', extra: sparkline(samples) }),
      card('Failures', fmtNum(o.totals.failures),
        fmtNum(o.totals.runs) + ' runs · ' + fmtNum(o.totals.missed) + ' missed · ' + fmtNum(o.totals.skipped) + ' skipped',
        { key: 'failures', bad: o.totals.failures > 0 }),
      card('Dead letters', fmtNum(o.dead_letters.total), 'waiting for replay or purge',
        { key: 'dead', href: '#/dead', bad: o.dead_letters.total > 0 }),
      card('Due now', fmtNum(o.queues.due), 'firings at or past their instant', { key: 'due' }),
      card('Running', fmtNum(o.queues.running), fmtNum(o.queues.retrying) + ' queued for another attempt', { key: 'running' }),
    );
    const notes = [];
    if (!j.complete) {
      notes.push(h('p', { class: 'muted' },
        'Counts and totals cover the first ' + fmtNum(j.scanned) + ' of ' + fmtNum(j.total) + ' jobs (by id).'));
    }
    notes.push(h('p', { class: 'muted' },
      'Redis time ' + fmtTime(o.now) + '. Rates come from the jobs\' run counters, sampled every '
      + REFRESH_MS / 1000 + ' s while this page is open.'));

    const nodes = o.nodes.length === 0
      ? empty('No live node: nothing fires until a node starts.')
      : h('table', {},
        h('thead', {}, h('tr', {},
          h('th', {}, 'Node'), h('th', {}, 'Version'), h('th', { class: 'num' }, 'Running'),
          h('th', { class: 'num' }, 'Load'),
          h('th', { class: 'num', title: 'Attempts the node started since it started' }, 'Runs started'),
          h('th', { class: 'num', title: 'Its share of the attempts the live nodes started' }, 'Share'),
          h('th', {}, 'Last heartbeat'), h('th', {}, 'Handlers'))),
        h('tbody', {}, o.nodes.map((n) => h('tr', { dataset: { node: n.id } },
          h('td', { class: 'mono' }, n.id),
          h('td', {}, n.version || '–'),
          h('td', { class: 'num' }, fmtNum(n.running) + ' / ' + fmtNum(n.max_concurrent_runs)),
          h('td', { class: 'num' }, fmtPct(n.load, 0)),
          h('td', { class: 'num', dataset: { field: 'runs-started' } }, fmtNum(n.runs_started)),
          h('td', { class: 'num', dataset: { field: 'share' } }, fmtPct(n.share, 1)),
          timeCell(n.last_seen_at),
          h('td', { class: 'mono' }, (n.handlers || []).join(', '))))));

    const deadJobs = o.dead_letters.jobs.length === 0
      ? empty('No dead letters.')
      : h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, 'Job'), h('th', { class: 'num' }, 'Dead letters'))),
        h('tbody', {}, o.dead_letters.jobs.slice(0, 10).map((d) => h('tr', {},
          h('td', {}, jobLink(d.job_id)), h('td', { class: 'num' }, fmtNum(d.count))))));

    show(
      h('h1', {}, 'Overview'),
      cards,
      notes,
      h('h2', {}, 'Live nodes'),
      h('div', { class: 'panel' }, nodes),
      h('h2', {}, 'Jobs with dead letters'),
      h('div', { class: 'panel' }, deadJobs),
    );
  }

  // ---- jobs ---------------------------------------------------------------------------------

  /** The largest string below every id that starts with `p` (ids are printable ASCII). */
  function justBefore(p) {
    const last = p.charCodeAt(p.length - 1);
    return p.slice(0, -1) + String.fromCharCode(last - 1) + '\x7f';
  }

  /** A page of jobs whose id starts with `prefix` (all jobs when empty), in id order. */
  async function findJobs(prefix, status, after) {
    const out = [];
    let cursor = after || (prefix ? justBefore(prefix) : undefined);
    for (;;) {
      const page = await api('GET', '/v1/jobs', { status, after: cursor, limit: PAGE_SIZE });
      for (const job of page.jobs) {
        if (prefix && !job.id.startsWith(prefix)) return { jobs: out, next: null };
        out.push(job);
      }
      cursor = page.next_cursor;
      // A filtered page may come back short with a cursor (the server bounds its scan).
      if (!cursor || out.length >= PAGE_SIZE) return { jobs: out, next: cursor || null };
      if (prefix && cursor > prefix && !cursor.startsWith(prefix)) return { jobs: out, next: null };
    }
  }

  function jobRow(job, refresh) {
    const firings = job.next_firings || [];
    const nextTitle = firings.map((f) => f.utc + '  (' + f.local + ')' + (f.fires_at ? '  fires ' + f.fires_at : '')).join('\n');
    const row = h('tr', { dataset: { job: job.id } },
      h('td', {}, jobLink(job.id)),
      h('td', {}, badge(job.status)),
      h('td', { class: 'mono' }, schedule(job.spec)),
      h('td', { class: 'mono' }, job.spec && job.spec.handler),
      firings.length ? timeCell(firings[0].utc, nextTitle) : h('td', { class: 'muted' }, '–'),
      timeCell(job.last_at),
      h('td', { class: 'num' }, fmtNum(job.runs)),
      h('td', { class: 'num' }, fmtNum(job.failures)));
    row.append(h('td', { class: 'actions' }, jobActions(job, (updated) => {
      if (updated === 'deleted') row.remove(); else refresh();
    })));
    return row;
  }

  async function pageJobs(seq, params) {
    const q = params.get('q') || '';
    const status = params.get('status') || '';
    const search = h('input', {
      type: 'search', id: 'job-search', placeholder: 'job id or its beginning', value: q,
      'aria-label': 'Search jobs by id',
    });
    const filter = h('select', { id: 'job-status', 'aria-label': 'Status' },
      ['', 'active', 'paused', 'finished', 'waiting'].map((s) => {
        const o = h('option', { value: s }, s || 'any status');
        if (s === status) o.selected = true;
        return o;
      }));
    const go = () => {
      const p = new URLSearchParams();
      if (search.value.trim()) p.set('q', search.value.trim());
      if (filter.value) p.set('status', filter.value);
      const s = p.toString();
      const target = '#/jobs' + (s ? '?' + s : '');
      if (location.hash === target) route(); else location.hash = target;
    };
    const form = h('form', {
      class: 'toolbar', role: 'search', onsubmit: (e) => { e.preventDefault(); go(); },
    }, search, filter, h('button', { type: 'submit' }, 'Search'), h('span', { class: 'spacer' }),
    h('button', { type: 'button', onclick: () => route() }, 'Refresh'));
    filter.addEventListener('change', go);

    const result = await findJobs(q, status);
    if (seq !== state.seq) return;
    const tbody = h('tbody');
    const refresh = () => route();
    result.jobs.forEach((j) => tbody.append(jobRow(j, refresh)));
    const more = h('div', { class: 'toolbar' });
    const addMore = (next) => {
      more.replaceChildren();
      if (!next) return;
      more.append(h('button', {
        type: 'button', onclick: async () => {
          try {
            const page = await findJobs(q, status, next);
            page.jobs.forEach((j) => tbody.append(jobRow(j, refresh)));
            addMore(page.next);
          } catch (e) { banner(e.message, 'error'); }
        },
      }, 'Load more'));
    };
    addMore(result.next);
    let table;
    if (result.jobs.length === 0) {
      table = empty(q ? 'No job id starts with “' + q + '”' + (status ? ' among ' + status + ' jobs.' : '.')
        : status ? 'No ' + status + ' jobs.' : 'No jobs yet. Create one with PUT /v1/jobs/{id} or `keyfire job`.');
    } else {
      table = h('table', { id: 'jobs-table' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Job'), h('th', {}, 'Status'), h('th', {}, 'Schedule'), h('th', {}, 'Handler'),
          h('th', {}, 'Next firing (UTC)'), h('th', {}, 'Last firing'), h('th', { class: 'num' }, 'Runs'),
          h('th', { class: 'num' }, 'Failures'), h('th', {}, ''))),
        tbody);
    }
    show(h('h1', {}, 'Jobs'), form, h('div', { class: 'panel' }, table), more);
  }

  // ---- one job ------------------------------------------------------------------------------

  function deadTable(jobId, dead, after) {
    if (dead.length === 0) return empty('No dead letters.');
    return h('table', { class: 'dead-table', dataset: { job: jobId } },
      h('thead', {}, h('tr', {},
        h('th', {}, 'Firing'), h('th', {}, 'Scheduled'), h('th', { class: 'num' }, 'Attempts'),
        h('th', {}, 'Last error'), h('th', {}, 'Failed'), h('th', {}, ''))),
      h('tbody', {}, dead.map((d) => h('tr', { dataset: { firing: d.firing_id } },
        h('td', { class: 'mono nowrap' }, d.firing_id),
        timeCell(d.scheduled_at),
        h('td', { class: 'num' }, fmtNum(d.attempts)),
        h('td', { class: 'error' }, d.error || ''),
        timeCell(d.failed_at),
        h('td', { class: 'actions' },
          h('button', {
            type: 'button', class: 'small', onclick: async () => {
              if (await act('Replay dead letter', 'Run firing ' + d.firing_id + ' again, as attempt 1?', 'Replay',
                async () => {
                  const r = await api('POST', jobPath(jobId, '/dead/replay'), { firing: d.firing_id });
                  return 'Queued ' + r.count + ' dead letter(s) of "' + jobId + '" again.';
                })) after();
            },
          }, 'Replay'),
          h('button', {
            type: 'button', class: 'small danger', onclick: async () => {
              if (await act('Purge dead letter', 'Drop firing ' + d.firing_id + ' for good?', 'Purge',
                async () => {
                  const r = await api('DELETE', jobPath(jobId, '/dead'), { firing: d.firing_id });
                  return 'Purged ' + r.count + ' dead letter(s) of "' + jobId + '".';
                })) after();
            },
          }, 'Purge'))))));
  }

  function deadAllButtons(jobId, count, after) {
    if (count === 0) return [];
    return [
      h('button', {
        type: 'button', class: 'small', onclick: async () => {
          if (await act('Replay all', 'Run all ' + count + ' dead letter(s) of "' + jobId + '" again, as attempt 1?', 'Replay all',
            async () => {
              const r = await api('POST', jobPath(jobId, '/dead/replay'));
              return 'Queued ' + r.count + ' dead letter(s) of "' + jobId + '" again.';
            })) after();
        },
      }, 'Replay all'),
      h('button', {
        type: 'button', class: 'small danger', onclick: async () => {
          if (await act('Purge all', 'Drop all ' + count + ' dead letter(s) of "' + jobId + '" for good?', 'Purge all',
            async () => {
              const r = await api('DELETE', jobPath(jobId, '/dead'));
              return 'Purged ' + r.count + ' dead letter(s) of "' + jobId + '".';
            })) after();
        },
      }, 'Purge all'),
    ];
  }

  /** A job's run limits and how far it is: `3 of 10 runs`, `paused after 2 failures`. */
  function runLimits(spec, l) {
    const parts = [];
    if (spec.max_runs) parts.push(fmtNum(l.succeeded || 0) + ' of ' + fmtNum(spec.max_runs) + ' runs');
    if (spec.pause_after_failures) parts.push('pause after ' + spec.pause_after_failures + ' failures in a row (' + fmtNum(l.failure_streak || 0) + ' now)');
    if (l.stopped) parts.push('stopped: ' + l.stopped);
    return parts.join(' · ') || '–';
  }

  async function pageJob(seq, id) {
    const [job, runs, dead, why] = await Promise.all([
      api('GET', jobPath(id)),
      api('GET', jobPath(id, '/runs'), { limit: 50, include: 'skipped' }),
      api('GET', jobPath(id, '/dead'), { limit: 100 }),
      api('GET', jobPath(id, '/why')),
    ]);
    if (seq !== state.seq) return;
    const again = () => route();
    const spec = job.spec || {};
    const facts = h('dl', { class: 'facts' },
      h('dt', {}, 'Schedule'), h('dd', { class: 'mono' }, schedule(spec)),
      h('dt', {}, 'Handler'), h('dd', { class: 'mono' }, spec.handler || '–'),
      h('dt', {}, 'Version'), h('dd', {}, String(job.version)),
      h('dt', {}, 'Created'), h('dd', {}, fmtTime(job.created_at)),
      h('dt', {}, 'Updated'), h('dd', {}, fmtTime(job.updated_at)),
      h('dt', {}, 'Last firing'), h('dd', {}, fmtTime(job.last_at), ' ', h('span', { class: 'muted' }, fmtRel(job.last_at))),
      h('dt', {}, 'Runs'), h('dd', {}, fmtNum(job.runs) + ' (' + fmtNum(job.failures) + ' failed, ' + fmtNum(job.missed) + ' missed)'),
      h('dt', {}, 'Retries'), h('dd', {}, spec.retry ? JSON.stringify(spec.retry) : 'defaults'),
      spec.exclude && spec.exclude.length ? [h('dt', {}, 'Excludes'), h('dd', { class: 'mono' }, spec.exclude.join(', '))] : null,
      spec.jitter ? [h('dt', {}, 'Jitter'), h('dd', { class: 'mono' }, spec.jitter)] : null,
      job.run_limits ? [h('dt', {}, 'Run limits'), h('dd', { id: 'run-limits' }, runLimits(spec, job.run_limits))] : null,
      spec.after_task ? [h('dt', {}, 'After task'), h('dd', { class: 'mono', id: 'after-task' },
        link(['', 'jobs', spec.after_task], spec.after_task),
        job.status === 'waiting' ? ' (waiting for its success)' : '')] : null,
      spec.batch ? [h('dt', {}, 'Batch'), h('dd', { class: 'mono' }, spec.batch)] : null,
    );
    const firings = (job.next_firings || []).length === 0
      ? empty(job.status === 'active' ? 'No firing left.' : 'None while ' + job.status + '.')
      : h('ol', { class: 'firings', id: 'next-firings' }, job.next_firings.map((f) =>
        h('li', {}, fmtTime(f.utc), ' ', h('span', { class: 'muted' }, '· ' + fmtLocal(f.local) + ' ' + job.tz + ' · ' + fmtRel(f.utc)
          + (f.fires_at ? ' · fires ' + fmtTime(f.fires_at) + ' (jitter)' : '')))));

    // Runs and the instants that did not run (the ledger), newest first.
    const skipRow = (k) => h('tr', { class: 'skipped', dataset: { skip: k.reason } },
      h('td', { class: 'mono nowrap' }, k.count === 1 ? 'skipped 1 instant' : 'skipped ' + fmtNum(k.count) + ' instants'),
      h('td', { class: 'num' }, '–'),
      h('td', {}, '–'),
      timeCell(k.last_at),
      h('td', { class: 'muted', colspan: 2 }, k.count === 1 ? '' : 'from ' + fmtTime(k.first_at)),
      h('td', {}, badge(k.reason, 'skip')),
      h('td', {}, '–'),
      h('td', { class: 'mono' }, k.detail || ''));
    const runRows = (runs.timeline || []).map((e) => e.kind === 'skipped' ? skipRow(e.skipped) : runRow(e.run));
    function runRow(r) {
      const late = r.started_at && r.scheduled_at
        ? new Date(r.started_at).getTime() - new Date(r.scheduled_at).getTime() : null;
      return h('tr', { dataset: { firing: r.firing_id, attempt: r.attempt } },
        h('td', { class: 'mono nowrap' }, r.firing_id),
        h('td', { class: 'num' }, String(r.attempt)),
        h('td', { class: 'mono nowrap' }, r.node),
        timeCell(r.scheduled_at),
        h('td', { class: 'num', title: 'started − scheduled' }, late === null ? '–' : (late < 0 ? '-' : '+') + fmtSpan(late)),
        h('td', { class: 'num' }, duration(r.started_at, r.finished_at)),
        h('td', {}, badge(r.outcome)),
        h('td', {}, r.fate ? badge(r.fate) : '–', r.retry_at ? h('div', { class: 'muted' }, 'next ' + fmtRel(r.retry_at)) : null),
        h('td', { class: 'error' }, r.error || ''));
    }
    const runsTable = runRows.length === 0 ? empty('No runs yet.')
      : h('table', { id: 'runs-table' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Firing'), h('th', { class: 'num' }, 'Attempt'), h('th', {}, 'Node'),
          h('th', {}, 'Scheduled'), h('th', { class: 'num' }, 'Late'), h('th', { class: 'num' }, 'Took'),
          h('th', {}, 'Outcome'), h('th', {}, 'Then'), h('th', {}, 'Error'))),
        h('tbody', {}, runRows));

    show(
      h('p', {}, link(['', 'jobs'], '← Jobs')),
      h('h1', {}, h('span', { class: 'mono', id: 'job-id' }, job.id), badge(job.status),
        h('span', { class: 'actions' }, jobActions(job, (updated) => {
          if (updated === 'deleted') location.hash = '#/jobs'; else again();
        }))),
      h('div', { class: 'cols' },
        h('div', {}, h('h2', {}, 'Job'), h('div', { class: 'panel' }, facts)),
        h('div', {}, h('h2', {}, 'Next firings'), h('div', { class: 'panel' }, firings))),
      h('h2', {}, 'Why'),
      h('div', { class: 'panel', id: 'job-why', dataset: { state: why.state } }, h('p', {}, why.summary)),
      h('h2', {}, 'Runs ', h('span', { class: 'muted' }, '(newest first, last 50, with the instants that did not run)')),
      h('div', { class: 'panel' }, runsTable),
      h('h2', {}, 'Dead letters ', deadAllButtons(job.id, dead.dead.length, again)),
      h('div', { class: 'panel' }, deadTable(job.id, dead.dead, again)),
      h('h2', {}, 'Spec'),
      h('div', { class: 'panel' }, h('pre', { class: 'spec', id: 'job-spec' }, JSON.stringify(spec, null, 2))),
    );
  }

  // ---- dead letters -------------------------------------------------------------------------

  async function pageDead(seq) {
    const o = await api('GET', '/v1/overview');
    if (seq !== state.seq) return;
    const jobs = o.dead_letters.jobs.slice(0, 20);
    const lists = await Promise.all(jobs.map((d) =>
      api('GET', jobPath(d.job_id, '/dead'), { limit: 100 }).then((r) => r.dead, () => [])));
    if (seq !== state.seq) return;
    const again = () => route();
    const sections = jobs.map((d, i) => h('section', { dataset: { job: d.job_id } },
      h('h2', {}, jobLink(d.job_id), ' ', h('span', { class: 'muted' }, fmtNum(d.count) + ' dead letter(s)'), ' ',
        deadAllButtons(d.job_id, d.count, again)),
      h('div', { class: 'panel' }, deadTable(d.job_id, lists[i], again))));
    const note = o.dead_letters.jobs.length > jobs.length
      ? h('p', { class: 'muted' }, 'Showing the ' + jobs.length + ' jobs with the most dead letters of ' + o.dead_letters.jobs.length + '.')
      : null;
    show(
      h('h1', {}, 'Dead letters ', h('span', { class: 'muted' }, fmtNum(o.dead_letters.total))),
      h('p', { class: 'muted' }, 'Firings that used up their attempts. Replay runs one again as attempt 1 with the same firing id; purge drops it.'),
      note,
      jobs.length === 0 ? h('div', { class: 'panel' }, empty('No dead letters.')) : sections,
    );
  }

  // ---- topics (the delay queue) -------------------------------------------------------------

  /** Topics whose dead letters the topics page lists, and how many of each. */
  const DEAD_TOPICS = 5;
  const DEAD_PER_TOPIC = 10;

  const topicPath = (topic, tail) => '/v1/topics/' + encodeURIComponent(topic) + tail;

  /** A topic's Pause or Resume button: pops deliver nothing while it is paused. */
  function topicPauseButton(t, after) {
    const pausing = !t.paused;
    return h('button', {
      type: 'button', class: 'small', dataset: { action: pausing ? 'pause' : 'resume' }, onclick: async () => {
        const done = pausing
          ? await act('Pause topic', 'Pause topic "' + t.topic + '"? Pops deliver nothing until it is resumed; adds are still taken, and tasks handed out can still be finished.', 'Pause',
            async () => { await api('POST', topicPath(t.topic, '/pause')); return 'Paused topic "' + t.topic + '".'; })
          : await act('Resume topic', 'Resume topic "' + t.topic + '"? Its ready tasks are delivered again, oldest first.', 'Resume',
            async () => { await api('POST', topicPath(t.topic, '/resume')); return 'Resumed topic "' + t.topic + '".'; });
        if (done) after();
      },
    }, pausing ? 'Pause' : 'Resume');
  }

  /** Replay all or purge all of a topic's dead letters. */
  function topicDeadButtons(t, after) {
    return h('span', { class: 'actions' },
      h('button', {
        type: 'button', class: 'small', dataset: { action: 'replay' }, onclick: async () => {
          if (await act('Replay all', 'Make all ' + t.dead + ' dead letter(s) of topic "' + t.topic + '" ready again, with their deliveries reset?', 'Replay all',
            async () => {
              const r = await api('POST', topicPath(t.topic, '/dead/replay'));
              return 'Made ' + r.count + ' dead letter(s) of topic "' + t.topic + '" ready again.';
            })) after();
        },
      }, 'Replay all'),
      ' ',
      h('button', {
        type: 'button', class: 'small', dataset: { action: 'purge' }, onclick: async () => {
          if (await act('Purge all', 'Drop all ' + t.dead + ' dead letter(s) of topic "' + t.topic + '" for good?', 'Purge all',
            async () => {
              const r = await api('DELETE', topicPath(t.topic, '/dead'));
              return 'Purged ' + r.count + ' dead letter(s) of topic "' + t.topic + '".';
            })) after();
        },
      }, 'Purge all'));
  }

  async function pageTopics(seq) {
    const r = await api('GET', '/v1/topics');
    if (seq !== state.seq) return;
    const again = () => route();
    const cols = ['delayed', 'ready', 'reserved', 'dead', 'added', 'delivered', 'redelivered', 'done', 'deleted'];
    const table = r.topics.length === 0
      ? empty('No topics yet. Producers add tasks with POST /v1/topics/{topic}/tasks.')
      : h('table', { class: 'topics-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Topic'),
          cols.map((c) => h('th', { class: 'num' }, c[0].toUpperCase() + c.slice(1))), h('th', {}, ''))),
        h('tbody', {}, r.topics.map((t) => h('tr', { dataset: { topic: t.topic } },
          h('td', { class: 'mono nowrap' }, t.topic,
            t.paused ? h('span', { dataset: { col: 'paused' } }, ' ', badge('paused')) : null),
          cols.map((c) => h('td', { class: 'num', dataset: { col: c } }, fmtNum(t[c]))),
          h('td', {}, topicPauseButton(t, again))))));
    // The dead letters of the first topics that have some (newest first), with buttons that
    // replay or purge them all (`keyfire topics dead` and the API also take ids).
    const withDead = r.topics.filter((t) => t.dead > 0).slice(0, DEAD_TOPICS);
    const lists = await Promise.all(withDead.map((t) =>
      api('GET', '/v1/topics/' + encodeURIComponent(t.topic) + '/dead', { limit: DEAD_PER_TOPIC })));
    if (seq !== state.seq) return;
    const dead = withDead.map((t, i) => [
      h('h2', { dataset: { deadTopic: t.topic } }, 'Dead letters of ', h('span', { class: 'mono' }, t.topic), ' ',
        h('span', { class: 'muted' }, fmtNum(t.dead)), ' ', topicDeadButtons(t, again)),
      h('div', { class: 'panel' }, h('table', { class: 'topic-dead-table', dataset: { topic: t.topic } },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Task'), h('th', { class: 'num' }, 'Deliveries'), h('th', {}, 'Error'), h('th', {}, 'Died'))),
        h('tbody', {}, lists[i].dead.map((d) => h('tr', { dataset: { task: d.id } },
          h('td', { class: 'mono nowrap' }, d.id),
          h('td', { class: 'num' }, fmtNum(d.deliveries) + '/' + fmtNum(d.max_deliveries)),
          h('td', { class: 'error' }, d.error || ''),
          timeCell(d.died_at)))))),
    ]);
    show(
      h('h1', {}, 'Topics ', h('span', { class: 'muted' }, fmtNum(r.topics.length))),
      h('p', { class: 'muted' },
        'Delay-queue topics: tasks by state now (delayed, ready, reserved, dead letters), then totals since each topic was first used. A paused topic delivers nothing until it is resumed.'),
      h('div', { class: 'panel' }, table),
      dead,
    );
  }

  // ---- limits (flow control) ----------------------------------------------------------------

  async function pageLimits(seq) {
    const r = await api('GET', '/v1/limits');
    if (seq !== state.seq) return;
    const opt = (v) => (v === undefined || v === null ? '–' : fmtNum(v));
    const table = r.limits.length === 0
      ? empty('No limits. Set one with PUT /v1/limits/{key}, `keyfire limits set`, or [[flow_limits]] in the config.')
      : h('table', { class: 'limits-table' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Key'),
          h('th', { class: 'num', title: 'Most firings started per second' }, 'Rate/s'),
          h('th', { class: 'num', title: 'Most firings running at once' }, 'In flight'),
          h('th', { class: 'num', title: 'Firings running under this key now' }, 'Running'),
          h('th', { class: 'num', title: 'Firings started within the last second' }, 'Last second'),
          h('th', { class: 'num', title: 'Firings held back by this limit, waiting in line (delayed, not failed)' }, 'Held'))),
        h('tbody', {}, r.limits.map((l) => h('tr', { dataset: { limit: l.key } },
          h('td', { class: 'mono nowrap' }, l.key),
          h('td', { class: 'num', dataset: { col: 'rate' } }, opt(l.rate)),
          h('td', { class: 'num', dataset: { col: 'in_flight' } }, opt(l.in_flight)),
          h('td', { class: 'num', dataset: { col: 'running' } }, fmtNum(l.running)),
          h('td', { class: 'num', dataset: { col: 'started' } }, fmtNum(l.started_last_second)),
          h('td', { class: 'num', dataset: { col: 'held' } },
            l.held > 0 ? badge(fmtNum(l.held) + ' held', 'held') : fmtNum(l.held))))));
    show(
      h('h1', {}, 'Limits ', h('span', { class: 'muted' }, fmtNum(r.limits.length))),
      h('p', { class: 'muted' },
        'Flow control per key (host:<host> for http targets, or a job\'s limit_key): a firing over its limit is held back, keeps its place in line and runs at its turn.'),
      h('div', { class: 'panel' }, table),
    );
  }

  // ---- routing ------------------------------------------------------------------------------

  function needTokenView() {
    show(h('h1', {}, 'API token needed'),
      h('div', { class: 'panel' }, h('div', { class: 'empty' },
        'This node requires a bearer token (api.token). Enter it above; it is kept in this tab only (sessionStorage).')));
    $('#token-input').focus();
  }

  function updateTokenState() {
    const s = $('#token-state');
    if (!state.auth) s.textContent = 'auth off';
    else if (token()) s.textContent = 'token set';
    else s.textContent = 'token needed';
    $('#token-forget').disabled = !token();
  }

  async function route() {
    const seq = ++state.seq;
    clearInterval(state.timer);
    state.timer = null;
    const raw = location.hash.replace(/^#/, '') || '/';
    const [pathPart, queryPart] = raw.split('?');
    let parts;
    try {
      parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
    } catch (e) {
      parts = [];
    }
    const params = new URLSearchParams(queryPart || '');
    const page = parts[0] || 'overview';
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('current', a.dataset.page === (page === 'job' ? 'jobs' : page));
    }
    updateTokenState();
    if (state.auth && !token()) {
      needTokenView();
      return;
    }
    let render;
    if (page === 'overview') render = () => pageOverview(seq);
    else if (page === 'jobs') render = () => pageJobs(seq, params);
    else if (page === 'job' && parts[1]) render = () => pageJob(seq, parts[1]);
    else if (page === 'dead') render = () => pageDead(seq);
    else if (page === 'topics') render = () => pageTopics(seq);
    else if (page === 'limits') render = () => pageLimits(seq);
    else render = async () => show(h('h1', {}, 'No such page'), h('p', {}, link([''], 'Overview')));
    document.title = 'keyfire · ' + (page === 'job' ? parts[1] : page);
    const run = async (quiet) => {
      try {
        await render();
      } catch (e) {
        if (seq !== state.seq) return;
        if (e.status === 401) {
          banner('The node refused the token: ' + e.message, 'error');
          needTokenView();
          updateTokenState();
          return;
        }
        if (!quiet) show(h('h1', {}, 'Cannot load this page'), h('div', { class: 'panel' }, empty(e.message)));
        else banner(e.message, 'error');
      }
    };
    show(h('p', { class: 'muted' }, 'Loading…'));
    await run(false);
    if ((page === 'overview' || page === 'limits') && seq === state.seq) {
      state.timer = setInterval(() => { if (!document.hidden) run(true); }, REFRESH_MS);
    }
  }

  async function start() {
    $('#token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const v = $('#token-input').value.trim();
      if (v) sessionStorage.setItem(TOKEN_KEY, v);
      $('#token-input').value = '';
      clearBanner();
      route();
    });
    $('#token-forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      route();
    });
    $('#banner-close').addEventListener('click', clearBanner);
    $('#confirm-ok').addEventListener('click', () => $('#confirm').close('ok'));
    $('#confirm-cancel').addEventListener('click', () => $('#confirm').close('cancel'));
    window.addEventListener('hashchange', () => { clearBanner(); route(); });
    try {
      const res = await fetch('/ui/config.json', { cache: 'no-store' });
      const config = await res.json();
      state.auth = Boolean(config.auth);
      $('#footer-version').textContent = 'keyfire ' + config.version;
    } catch (e) {
      state.auth = true; // assume the safe case; a 401 would say so anyway
    }
    route();
  }

  start();
})();
