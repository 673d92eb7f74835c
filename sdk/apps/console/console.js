// strata's console (docs/sidecar.md "Console"). Served by strata-sidecar at /ui (data from the
// JSON routes under /ui/api, with the bearer token the reader gives) or written by
// `strata inspect --html` (the agent page embedded). Every value is put in the page as text,
// never as markup.
(function () {
  'use strict';
  const boot = JSON.parse(document.getElementById('strata-boot').textContent);
  const FILE = boot.mode === 'file';
  const main = document.getElementById('main');
  const LAYERS = ['system', 'tools', 'index', 'docs', 'history', 'volatile'];
  const LAYER_COLORS = ['#455a64', '#8d6e63', '#00897b', '#7cb342', '#1e88e5', '#fdd835'];
  const PAGE = 50;
  const TOKEN_KEY = 'strata-console-token';

  // ------------------------------------------------------------------ DOM and formatting

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'onclick') e.addEventListener('click', v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children) append(e, c);
    return e;
  }
  function append(parent, c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) { c.forEach((x) => append(parent, x)); return; }
    parent.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
    for (const c of children) {
      e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function num(v) {
    if (v === null || v === undefined || v === '') return '-';
    return typeof v === 'number' ? v.toLocaleString('en-US') : String(v);
  }
  function pct(v) { return v === null || v === undefined ? '-' : (100 * v).toFixed(1) + '%'; }
  function time(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').replace('.000Z', 'Z') : '-'; }
  function show(...nodes) { main.replaceChildren(); append(main, nodes); }
  function done() { document.body.setAttribute('data-ready', '1'); }
  function fail(message) {
    show(el('p', { class: 'error', id: 'error' }, message));
    document.body.setAttribute('data-error', message);
    done();
  }

  // ------------------------------------------------------------------ token and fetching

  // A token in the fragment (#token=T or #token=T&/agent/...) is kept for this tab only and
  // removed from the address: the fragment never reaches the server or its logs.
  function takeToken() {
    const hash = location.hash.slice(1);
    if (!hash.startsWith('token=')) return;
    const amp = hash.indexOf('&');
    const token = decodeURIComponent(amp < 0 ? hash.slice(6) : hash.slice(6, amp));
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, '', '#' + (amp < 0 ? '/agents' : hash.slice(amp + 1)));
  }

  class HttpError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function api(path) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = token ? { Authorization: 'Bearer ' + token } : {};
    const res = await fetch(path, { headers, credentials: 'omit', cache: 'no-store' });
    const text = await res.text();
    let body = null;
    try { body = JSON.parse(text); } catch (e) { body = null; }
    if (!res.ok) {
      const message = body && body.error ? body.error.message : text;
      throw new HttpError(res.status, 'HTTP ' + res.status + ': ' + message);
    }
    return body;
  }

  function login(message) {
    const input = el('input', { type: 'password', name: 'token', autocomplete: 'off',
                                placeholder: 'bearer token' });
    const form = el('form', { class: 'login' }, el('p', {}, message),
                    el('label', {}, 'Token: ', input), ' ', el('button', { type: 'submit' }, 'Sign in'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value);
      route();
    });
    show(form);
    done();
  }

  async function load(path, render) {
    try {
      render(await api(path));
      done();
    } catch (e) {
      if (e instanceof HttpError && e.status === 401) login(e.message);
      else fail(e.message);
    }
  }

  // ------------------------------------------------------------------ tables and pagers

  function table(id, columns, rows, rowAttrs) {
    const head = el('tr', {}, columns.map((c) => el('th', c.th || { class: c.text ? 'text' : null }, c.title)));
    const body = rows.map((r, i) => el('tr', rowAttrs ? rowAttrs(r, i) : {},
      columns.map((c) => el('td', { class: c.text ? 'text' : null, 'data-key': c.key }, c.cell ? c.cell(r) : num(r[c.key])))));
    return el('div', { class: 'scroll' }, el('table', { id }, el('thead', {}, head), el('tbody', {}, body)));
  }

  function pager(what, total, offset, limit, go) {
    const last = Math.min(total, offset + limit);
    return el('div', { class: 'pager', 'data-total': total, 'data-offset': offset },
      el('button', { disabled: offset === 0 ? '' : null, onclick: () => go(Math.max(0, offset - limit)) }, '\u2190 newer'),
      el('span', {}, total === 0 ? 'no ' + what : what + ' ' + (offset + 1) + '\u2013' + last + ' of ' + num(total)),
      el('button', { disabled: last >= total ? '' : null, onclick: () => go(offset + limit) }, 'older \u2192'));
  }

  function query(params) {
    return Object.entries(params).filter(([, v]) => v !== undefined && v !== '')
      .map(([k, v]) => encodeURIComponent(k) + '=' + encodeURIComponent(v)).join('&');
  }
  function parseQuery(text) {
    const out = {};
    for (const part of (text || '').split('&')) {
      if (!part) continue;
      const eq = part.indexOf('=');
      out[decodeURIComponent(eq < 0 ? part : part.slice(0, eq))] = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
    }
    return out;
  }
  function agentPath(tenant, id) { return encodeURIComponent(tenant) + '/' + encodeURIComponent(id); }

  // ------------------------------------------------------------------ agents list

  const AGENT_COLUMNS = [
    { key: 'tenant', title: 'tenant', text: true },
    { key: 'id', title: 'agent', text: true },
    { key: 'turns', title: 'turns' },
    { key: 'tokens', title: 'tokens now' },
    { key: 'cached_share', title: 'cached share' },
    { key: 'prefix_breaks', title: 'prefix breaks' },
    { key: 'compactions', title: 'compactions' },
    { key: 'requests', title: 'requests' },
    { key: 'last_activity', title: 'last activity', text: true },
  ];

  function agentsPage(params) {
    const q = { sort: params.sort || 'last_activity', order: params.order || 'desc',
                offset: params.offset || 0, limit: PAGE };
    load('/ui/api/agents?' + query(q), (data) => {
      const go = (changes) => { location.hash = '#/agents?' + query(Object.assign({}, q, changes)); };
      const columns = AGENT_COLUMNS.map((c) => Object.assign({}, c, {
        th: { 'data-sort': c.key, class: c.text ? 'text' : null,
              'aria-sort': data.sort === c.key ? (data.order === 'asc' ? 'ascending' : 'descending') : null,
              onclick: () => go({ sort: c.key, offset: 0,
                                  order: data.sort === c.key && data.order === 'desc' ? 'asc' : 'desc' }) },
        cell: c.key === 'id' ? (r) => el('a', { href: '#/agent/' + agentPath(r.tenant, r.id) }, r.id)
          : c.key === 'cached_share' ? (r) => pct(r.cached_share)
            : c.key === 'last_activity' ? (r) => time(r.last_activity_unix_ms) : null,
      }));
      show(el('h1', {}, 'Agents'),
        pager('agents', data.total, data.offset, data.limit, (o) => go({ offset: o })),
        table('agents', columns, data.agents, (r) => ({ class: 'agent', 'data-tenant': r.tenant, 'data-id': r.id, 'data-tokens': r.tokens,
                                                      'data-turns': r.turns, 'data-cached-share': r.cached_share })));
    });
  }

  // ------------------------------------------------------------------ agent page

  function summary(a) {
    const items = [['tenant', a.tenant], ['agent', a.id], ['model', a.model], ['tokenizer', a.tokenizer],
      ['turns', num(a.turns)], ['tokens now', num(a.tokens)], ['requests', num(a.requests)],
      ['cached share', pct(a.cached_share)], ['prefix breaks', num(a.prefix_breaks)],
      ['compactions', num(a.compactions)], ['created', time(a.created_unix_ms)],
      ['last activity', time(a.updated_unix_ms)]];
    return el('dl', { class: 'summary', id: 'summary' }, items.map(([k, v]) => [el('dt', {}, k), el('dd', { 'data-key': k }, v)]));
  }

  // Stacked bars (cached, uncached, output) per request or bucket, the predicted cached tokens as
  // a tick, TTFT as a dashed line on its own scale, prefix breaks above and compactions below.
  function timelineSvg(t, onBar) {
    const W = 1000, H = 300, top = 22, bottom = 24, left = 44, right = 44;
    const n = Math.max(1, t.bars.length);
    const bw = (W - left - right) / n;
    const peak = Math.max(1, ...t.bars.map((b) => b.cached + b.uncached + b.output), ...t.bars.map((b) => b.predicted));
    const ttftPeak = Math.max(1, ...t.bars.map((b) => b.ttft_ms));
    const y = (v) => H - bottom - (H - top - bottom) * v / peak;
    const yt = (v) => H - bottom - (H - top - bottom) * v / ttftPeak;
    const root = svg('svg', { id: 'timeline', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none',
                              'data-bars': t.bars.length, 'data-total': t.total });
    root.appendChild(svg('text', { class: 'axis', x: 2, y: top - 8 }, num(Math.round(peak)) + ' tokens'));
    root.appendChild(svg('text', { class: 'axis', x: W - right - 70, y: top - 8 }, 'TTFT ' + Math.round(ttftPeak) + ' ms'));
    root.appendChild(svg('line', { x1: left, x2: W - right, y1: H - bottom, y2: H - bottom, stroke: '#999' }));
    const ttft = [];
    t.bars.forEach((b, i) => {
      const x = left + i * bw, w = Math.max(0.6, bw * 0.8);
      const g = svg('g', { class: 'bar' + (b.failed ? ' failed' : ''), 'data-index': i, 'data-first': b.first,
        'data-last': b.last, 'data-request-id': b.request_id, 'data-cached': b.cached, 'data-uncached': b.uncached,
        'data-output': b.output, 'data-predicted': b.predicted, 'data-reported': b.reported, 'data-ttft-ms': b.ttft_ms });
      let base = 0;
      for (const part of ['cached', 'uncached', 'output']) {
        const v = b[part];
        g.appendChild(svg('rect', { class: part, x, width: w, y: y(base + v), height: Math.max(0, y(base) - y(base + v)) }));
        base += v;
      }
      g.appendChild(svg('line', { class: 'predicted', x1: x, x2: x + w, y1: y(b.predicted), y2: y(b.predicted) }));
      const range = b.first === b.last ? 'request #' + (b.first + 1) : 'requests #' + (b.first + 1) + '\u2013' + (b.last + 1) + ' (means)';
      g.appendChild(svg('title', {}, `${range} ${b.request_id}\ncached ${b.cached}${b.reported ? '' : ' (predicted: not reported)'}, uncached ${b.uncached}, output ${b.output}\npredicted cached ${b.predicted}, TTFT ${b.ttft_ms} ms`));
      g.addEventListener('click', () => onBar(b));
      root.appendChild(g);
      ttft.push(`${x + w / 2},${yt(b.ttft_ms)}`);
    });
    if (ttft.length) root.appendChild(svg('polyline', { class: 'ttft', points: ttft.join(' ') }));
    const barOf = (at) => Math.min(n - 1, Math.floor(at / (t.bucket || 1)));
    for (const m of t.breaks) {
      const cx = left + barOf(m.at) * bw + bw * 0.4;
      root.appendChild(svg('path', { class: 'break-mark', 'data-at': m.at, d: `M${cx - 5},${top - 16} L${cx + 5},${top - 16} L${cx},${top - 6} Z` },
        svg('title', {}, 'prefix break: ' + m.causes.join('; '))));
    }
    for (const c of t.compactions) {
      const cx = left + barOf(c.at) * bw + bw * 0.4;
      root.appendChild(svg('path', { class: 'compaction-mark', 'data-at': c.at, d: `M${cx},${H - bottom + 4} l5,8 l-5,8 l-5,-8 Z` },
        svg('title', {}, 'compaction: ' + (c.report.policy || ''))));
    }
    return root;
  }

  function legend() {
    const item = (color, text, style) => el('span', {}, el('i', { style: (style || 'background:') + color }), text);
    return el('div', { class: 'legend' }, item('var(--cached)', 'cached input'), item('var(--uncached)', 'uncached input'),
      item('var(--output)', 'output'), item('#000', 'predicted cached (tick)', 'height:2px;background:'),
      item('#d81b60', 'TTFT (dashed, right scale)', 'height:2px;background:'),
      item('var(--break)', '\u25BC prefix break'), item('var(--compaction)', '\u25C6 compaction'));
  }

  function breaksList(t) {
    if (!t.breaks.length) return el('p', { class: 'muted', id: 'breaks' }, 'No prefix breaks.');
    return el('ul', { id: 'breaks' }, t.breaks.map((b) => el('li', { class: 'break', 'data-at': b.at,
      'data-request-id': b.request_id, 'data-invalidated': b.invalidated_tokens },
      'request #' + (b.at + 1) + ' ', el('code', {}, b.request_id), ': ',
      b.causes.map((c) => el('span', { class: 'cause' }, c)),
      ' \u2014 ' + num(b.invalidated_tokens) + ' cached tokens invalidated',
      b.payload && b.payload.segment_id ? ' (first difference: ' + (b.payload.layer || '') + ' segment ' + b.payload.segment_id + ')' : '')));
  }

  function compactionsList(t) {
    if (!t.compactions.length) return el('p', { class: 'muted', id: 'compactions' }, 'No compactions.');
    const fields = ['policy', 'reason', 'tokens_before', 'tokens_after', 'masked', 'evicted', 'summarized',
      'reasoning_dropped', 'rounds', 'invalidated_tokens', 'expected_saving', 'invalidation_cost', 'boundary', 'summarizer'];
    return el('div', { id: 'compactions' }, t.compactions.map((c) => {
      const r = c.report || {};
      return el('details', { class: 'compaction', 'data-at': c.at, 'data-turn': c.turn },
        el('summary', {}, `turn ${c.turn}, with request #${c.at + 1}: ${r.policy || 'compaction'} \u2014 ${num(r.tokens_before)} \u2192 ${num(r.tokens_after)} tokens`),
        el('table', {}, fields.filter((f) => r[f] !== undefined).map((f) =>
          el('tr', {}, el('th', { class: 'text' }, f), el('td', { class: 'text', 'data-key': f }, typeof r[f] === 'number' ? num(r[f]) : String(r[f]))))));
    }));
  }

  function lineChart(id, labels, datasets, stacked) {
    const box = el('div', { class: 'chart' });
    if (typeof Chart === 'undefined') return null;
    const canvas = el('canvas', { id });
    box.appendChild(canvas);
    // Drawn after the canvas is in the page.
    setTimeout(() => new Chart(canvas, {
      type: 'line', data: { labels, datasets },
      options: { animation: false, maintainAspectRatio: false, responsive: true, pointRadius: 0,
                 scales: { y: { stacked: !!stacked, beginAtZero: true } }, elements: { point: { radius: 0 } } },
    }), 0);
    return box;
  }

  function growthSection(g) {
    const labels = g.points.map((p) => p.turn);
    const datasets = LAYERS.map((l, i) => ({ label: l, data: g.points.map((p) => p.layers[l] || 0), fill: true,
                                             backgroundColor: LAYER_COLORS[i] + '99', borderColor: LAYER_COLORS[i] }));
    const rows = g.points.map((p) => Object.assign({ turn: p.turn, total: p.total, compactions: p.compactions,
      summary_input_tokens: p.summary_input_tokens || 0, summary_cached_tokens: p.summary_cached_tokens || 0,
      summary_output_tokens: p.summary_output_tokens || 0 }, p.layers));
    return [el('h2', {}, 'Growth by layer'),
      g.downsampled ? el('p', { class: 'muted' }, `${num(g.total_points)} turns, shown as ${g.points.length} points`) : null,
      lineChart('growth', labels, datasets, true),
      el('details', {}, el('summary', {}, 'growth table'),
        table('growth-table', [{ key: 'turn', title: 'turn' }, ...LAYERS.map((l) => ({ key: l, title: l })),
          { key: 'total', title: 'total' }, { key: 'compactions', title: 'compactions' },
          { key: 'summary_input_tokens', title: 'summary input' }, { key: 'summary_cached_tokens', title: 'summary cached' },
          { key: 'summary_output_tokens', title: 'summary output' }], rows))];
  }

  function layoutSection(l) {
    const p = l.stable_prefix || {}, s = l.cache_salt || {};
    const yes = (v) => v === null || v === undefined ? 'unknown' : v ? 'yes' : 'no';
    return [el('h2', {}, 'Current layout'),
      table('layout', [{ key: 'layer', title: 'layer', text: true }, { key: 'segments', title: 'segments' },
        { key: 'tokens', title: 'tokens' }, { key: 'bytes', title: 'bytes' }], l.layers,
      (r) => ({ 'data-layer': r.layer, 'data-tokens': r.tokens })),
      el('p', {}, 'Stable prefix (model, tools, system, index, docs): ',
        p.error ? el('span', { class: 'error' }, p.error) : [num(p.bytes) + ' bytes, SHA-256 ', el('code', { id: 'prefix-hash' }, p.hash)]),
      el('p', { id: 'cache-salt' }, 'cache_salt scope: sent ' + yes(s.sent) + '; key: tenant "' + (s.tenant || '') +
        '", scope "' + (s.scope || '') + '", model version "' + (s.model_version || '') + '", template version "' +
        (s.template_version || '') + '"; deployment secret configured: ' + yes(s.secret_configured) +
        ' (the salt and its secret are never shown)')];
  }

  function recordsTable(data, selected, go) {
    const recs = data.records;
    const first = ['request_id', 'started_unix_ms'];
    const keys = first.concat(recs.length ? Object.keys(recs[0]).filter((k) => k !== 'type' && !first.includes(k)) : []);
    const link = (rid) => FILE ? '#request=' + encodeURIComponent(rid) : '#/agent/' + go.path + '?request=' + encodeURIComponent(rid);
    const columns = keys.map((k) => ({ key: k, title: k, text: typeof (recs[0] || {})[k] === 'string',
      cell: k === 'request_id' ? (r) => el('a', { href: link(r.request_id) }, r.request_id)
        : k === 'started_unix_ms' ? (r) => time(r.started_unix_ms) : null }));
    return el('div', { id: 'records-box' },
      pager('records', data.total, data.offset, data.limit, (o) => go(o)),
      table('records', columns, recs, (r) => ({ id: 'req-' + r.request_id, 'data-request-id': r.request_id,
                                                class: r.request_id === selected ? 'selected' : null })));
  }

  function agentPage(page, path, params) {
    const a = page.agent, t = page.timeline;
    const recordsBox = el('div', {});
    const localRecords = page.records;
    const showRecords = (data, selected) => {
      const go = (offset) => {
        if (FILE) { showRecords(slice(localRecords, offset), ''); return; }
        api('/ui/api/agents/' + path + '/records?' + query({ offset, limit: PAGE })).then((d) => showRecords(d, ''), (e) => fail(e.message));
      };
      go.path = path;
      recordsBox.replaceChildren(recordsTable(data, selected, go));
      const row = selected && document.getElementById('req-' + selected);
      if (row) row.scrollIntoView({ block: 'center' });
    };
    const openRequest = (rid) => {
      if (FILE) {
        const i = localRecords.records.findIndex((r) => r.request_id === rid);
        showRecords(slice(localRecords, i < 0 ? 0 : Math.floor(i / PAGE) * PAGE), rid);
        return;
      }
      api('/ui/api/agents/' + path + '/records?' + query({ request_id: rid, limit: PAGE }))
        .then((d) => showRecords(d, rid), (e) => fail(e.message));
    };
    const downsampled = t.downsampled ? ` (downsampled: ${t.bars.length} bars, each the mean of ${t.bucket} requests)` : '';
    show(el('h1', {}, 'Agent ', el('code', {}, a.id)), summary(a),
      el('h2', {}, `Requests: ${num(t.total)}${downsampled}`), timelineSvg(t, (b) => openRequest(b.request_id)), legend(),
      el('h2', {}, 'Prefix breaks'), breaksList(t),
      el('h2', {}, 'Compactions'), compactionsList(t),
      growthSection(page.growth), layoutSection(page.layout),
      el('h2', { id: 'recent' }, 'Recent records'),
      localRecords.total > localRecords.records.length && FILE
        ? el('p', { class: 'muted' }, `the newest ${localRecords.records.length} of ${num(localRecords.total)} records are in this file`) : null,
      recordsBox);
    if (params.request) openRequest(params.request);
    else showRecords(FILE ? slice(localRecords, 0) : localRecords, '');
  }

  function slice(records, offset) {
    return { total: records.records.length, offset, limit: PAGE, records: records.records.slice(offset, offset + PAGE) };
  }

  // ------------------------------------------------------------------ pools

  function poolsPage() {
    load('/ui/api/pools', (data) => {
      if (!data.configured) { show(el('h1', {}, 'Pools'), el('p', { id: 'no-pools' }, 'This sidecar has no length pools.')); return; }
      const columns = ['name', 'admitted', 'queued', 'degraded', 'refused', 'in_flight', 'waited', 'queue_timeouts', 'max_concurrency']
        .map((k) => ({ key: k, title: k, text: k === 'name' }));
      const history = data.history || [];
      const labels = history.map((h) => time(h.unix_ms).slice(11));
      const chart = lineChart('kv', labels, [{ label: 'KV in flight / capacity', data: history.map((h) => h.kv_usage), borderColor: '#6a1b9a' }]);
      const series = [];
      for (const p of data.now.pools) {
        for (const k of ['admitted', 'queued', 'degraded', 'refused']) {
          series.push({ label: p.name + ' ' + k, data: history.map((h) => ((h.pools || {})[p.name] || {})[k]) });
        }
      }
      const counts = lineChart('pool-counts', labels, series);
      show(el('h1', {}, 'Pools'),
        el('p', {}, `KV in flight ${num(data.now.kv_in_flight_tokens)} of ${num(data.now.kv_capacity_tokens)} tokens (${pct(data.now.kv_usage)})`),
        table('pools', columns, data.now.pools, (r) => ({ 'data-pool': r.name })),
        el('h2', {}, 'KV watermark over time (sampled while this page is open)'), chart,
        el('h2', {}, 'Admitted, queued, degraded and refused over time'), counts,
        el('details', {}, el('summary', {}, 'samples'), table('pool-samples', [{ key: 'when', title: 'time', text: true },
          { key: 'kv_usage', title: 'kv usage' }], history.map((h) => ({ when: time(h.unix_ms), kv_usage: h.kv_usage })))));
      setTimeout(() => { if (location.hash.startsWith('#/pools')) poolsPage(); }, 5000);
    });
  }

  // ------------------------------------------------------------------ routing

  function nav() {
    const n = document.getElementById('nav');
    if (FILE) { n.replaceChildren(el('span', {}, 'strata inspect --html')); return; }
    n.replaceChildren(el('a', { href: '#/agents' }, 'Agents'), ' \u00b7 ', el('a', { href: '#/pools' }, 'Pools'),
      ' \u00b7 ', el('a', { href: '#/agents', onclick: () => sessionStorage.removeItem(TOKEN_KEY) }, 'Sign out'));
  }

  function route() {
    document.body.removeAttribute('data-ready');
    if (FILE) {
      const params = parseQuery(location.hash.slice(1));
      agentPage(boot.page, '', params);
      done();
      return;
    }
    takeToken();
    const hash = location.hash.slice(1) || '/agents';
    const qa = hash.indexOf('?');
    const parts = (qa < 0 ? hash : hash.slice(0, qa)).split('/').filter(Boolean);
    const params = parseQuery(qa < 0 ? '' : hash.slice(qa + 1));
    if (parts[0] === 'agent' && parts.length === 3) {
      const path = agentPath(decodeURIComponent(parts[1]), decodeURIComponent(parts[2]));
      load('/ui/api/agents/' + path, (page) => agentPage(page, path, params));
    } else if (parts[0] === 'pools') {
      poolsPage();
    } else {
      agentsPage(params);
    }
  }

  nav();
  window.addEventListener('hashchange', route);
  route();
})();
