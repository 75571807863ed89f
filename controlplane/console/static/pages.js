// The pages of workloads and nodes: lists kept live by watches, and the
// detail pages of a node, a pod and a workload with their events and logs.

import { R, fetchAPI, resourcePath } from './api.js';
import { Collection, VirtualTable, el, kv, problem, smallTable } from './table.js';
import * as f from './format.js';

// page is what every page shares: it collects what to stop when the user
// leaves it.
export class Page {
  constructor(main) {
    this.main = main;
    this.stops = [];
  }
  onStop(fn) { this.stops.push(fn); return fn; }
  stop() { for (const s of this.stops.splice(0)) s(); }
  live(res, ns, sel) {
    const c = new Collection();
    this.onStop(c.watch(res, ns, sel));
    return c;
  }
  table(coll, columns, opts) {
    const t = new VirtualTable(coll, columns, opts);
    this.onStop(() => t.destroy());
    // Ages move on without events.
    const tick = setInterval(() => t.schedule(), 10000);
    this.onStop(() => clearInterval(tick));
    return t;
  }
  // follow calls render at most once a frame after coll changes.
  follow(coll, render) {
    let queued = false;
    const view = {
      changed: () => {
        if (queued) return;
        queued = true;
        requestAnimationFrame(() => { queued = false; render(); });
      },
    };
    this.onStop(coll.subscribe(view));
  }
  heading(text, ...extra) { this.main.append(el('h1', null, text, ...extra)); }
}

const nameCol = { title: 'Name', width: '22%', text: (o) => o.metadata.name };
const nsCol = { title: 'Namespace', width: '12%', text: (o) => o.metadata.namespace };
const ageCol = { title: 'Age', width: '6%', text: (o) => f.age(o.metadata.creationTimestamp) };

function filterBox(table, what) {
  const input = el('input', { type: 'search', placeholder: `filter ${what} by name`, 'aria-label': 'filter' });
  input.addEventListener('input', () => {
    const q = input.value.trim();
    table.setFilter(q ? (o) => o.metadata.name.includes(q) : null);
  });
  return input;
}

export function nodesPage(main) {
  const p = new Page(main);
  p.heading('Nodes');
  const nodes = p.live(R.nodes, '');
  const t = p.table(nodes, [
    nameCol,
    { title: 'Status', width: '13%', text: f.nodeStatus, cls: (n) => f.statusClass(f.nodeStatus(n)) },
    { title: 'Roles', width: '9%', text: f.nodeRoles },
    { title: 'Zone', width: '9%', text: f.zoneOf },
    { title: 'Pressure', width: '12%', text: f.pressure, cls: (n) => (f.pressure(n) === 'none' ? 'muted' : 'bad') },
    { title: 'Taints', width: '20%', text: f.taints },
    { title: 'Version', width: '9%', text: (n) => (n.status && n.status.nodeInfo && n.status.nodeInfo.kubeletVersion) || '' },
    ageCol,
  ], {
    what: 'nodes', onClick: (n) => { location.hash = '#/node/' + encodeURIComponent(n.metadata.name); },
    onFirstRender: (n) => { if (n > 0) mark('outpost:nodes-rendered'); },
  });
  t.root.querySelector('.toolbar').append(filterBox(t, 'nodes'));
  main.append(t.root);
  return p;
}

// mark records, once, when a page first showed its data, for the
// performance test (the Performance API's user timing).
function mark(name) {
  if (performance.getEntriesByName(name).length === 0) performance.mark(name);
}

function podColumns(withNode = true, owner = false) {
  return [
    nsCol,
    nameCol,
    owner && { title: 'Owner', width: '16%', text: (p) => { const o = f.ownerOf(p); return o ? `${o.kind}/${o.name}` : ''; } },
    { title: 'Ready', width: '6%', text: f.podReady },
    { title: 'Status', width: '12%', text: f.podStatus, cls: (p) => f.statusClass(f.podStatus(p)) },
    { title: 'Restarts', width: '7%', text: f.restarts },
    withNode && { title: 'Node', width: '14%', text: (p) => p.spec.nodeName || '' },
    { title: 'IP', width: '10%', text: (p) => (p.status && p.status.podIP) || '' },
    ageCol,
  ].filter(Boolean);
}

const openPod = (p) => { location.hash = `#/pod/${encodeURIComponent(p.metadata.namespace)}/${encodeURIComponent(p.metadata.name)}`; };

export function podsPage(main, ctx) {
  const p = new Page(main);
  p.heading('Pods', el('span', { class: 'muted' }, ctx.ns ? ` in ${ctx.ns}` : ' in all namespaces'));
  const pods = p.live(R.pods, ctx.ns);
  const t = p.table(pods, podColumns(), { what: 'pods', onClick: openPod, onFirstRender: () => mark('outpost:pods-rendered') });
  t.root.querySelector('.toolbar').append(filterBox(t, 'pods'));
  main.append(t.root);
  return p;
}

const workloadKinds = {
  deployment: { res: R.deployments, kind: 'Deployment', plural: 'deployments' },
  replicaset: { res: R.replicasets, kind: 'ReplicaSet', plural: 'replica sets' },
  daemonset: { res: R.daemonsets, kind: 'DaemonSet', plural: 'daemon sets' },
};

const openWorkload = (kind) => (o) => { location.hash = `#/${kind}/${encodeURIComponent(o.metadata.namespace)}/${encodeURIComponent(o.metadata.name)}`; };
const st = (o, field) => (o.status && o.status[field]) || 0;

const deploymentColumns = [nsCol, nameCol,
  { title: 'Ready', width: '8%', text: (d) => `${st(d, 'readyReplicas')}/${d.spec.replicas ?? 1}`, cls: (d) => (st(d, 'readyReplicas') >= (d.spec.replicas ?? 1) ? 'ok' : 'warn') },
  { title: 'Up-to-date', width: '8%', text: (d) => st(d, 'updatedReplicas') },
  { title: 'Available', width: '8%', text: (d) => st(d, 'availableReplicas') },
  { title: 'Strategy', width: '10%', text: (d) => (d.spec.strategy && d.spec.strategy.type) || 'RollingUpdate' },
  { title: 'Images', width: '20%', text: (d) => f.images(d.spec.template) },
  ageCol];
const replicaSetColumns = [nsCol, nameCol,
  { title: 'Desired', width: '7%', text: (r) => r.spec.replicas ?? 1 },
  { title: 'Current', width: '7%', text: (r) => st(r, 'replicas') },
  { title: 'Ready', width: '7%', text: (r) => st(r, 'readyReplicas') },
  { title: 'Owner', width: '16%', text: (r) => { const o = f.ownerOf(r); return o ? `${o.kind}/${o.name}` : ''; } },
  { title: 'Images', width: '18%', text: (r) => f.images(r.spec.template) },
  ageCol];
const daemonSetColumns = [nsCol, nameCol,
  { title: 'Desired', width: '8%', text: (d) => st(d, 'desiredNumberScheduled') },
  { title: 'Current', width: '8%', text: (d) => st(d, 'currentNumberScheduled') },
  { title: 'Ready', width: '8%', text: (d) => st(d, 'numberReady') },
  { title: 'Up-to-date', width: '8%', text: (d) => st(d, 'updatedNumberScheduled') },
  { title: 'Available', width: '8%', text: (d) => st(d, 'numberAvailable') },
  { title: 'Images', width: '16%', text: (d) => f.images(d.spec.template) },
  ageCol];

export function workloadsPage(main, ctx) {
  const p = new Page(main);
  p.heading('Workloads', el('span', { class: 'muted' }, ctx.ns ? ` in ${ctx.ns}` : ' in all namespaces'));
  for (const [kind, cols] of [['deployment', deploymentColumns], ['daemonset', daemonSetColumns], ['replicaset', replicaSetColumns]]) {
    const w = workloadKinds[kind];
    main.append(el('h2', null, w.kind + 's'));
    const t = p.table(p.live(w.res, ctx.ns), cols, { what: w.plural, name: kind + 's', short: true, onClick: openWorkload(kind) });
    main.append(t.root);
  }
  return p;
}

const eventColumns = (withObject) => [
  { title: 'Last seen', width: '8%', text: (e) => f.age(e.lastTimestamp || e.metadata.creationTimestamp) },
  { title: 'Type', width: '7%', text: (e) => e.type || '', cls: (e) => (e.type === 'Warning' ? 'bad' : '') },
  { title: 'Reason', width: '12%', text: (e) => e.reason || '' },
  withObject && { title: 'Object', width: '20%', text: (e) => `${(e.involvedObject.kind || '').toLowerCase()}/${e.involvedObject.name}` },
  { title: 'Count', width: '5%', text: (e) => e.count || 1 },
  { title: 'Message', width: withObject ? '48%' : '68%', text: (e) => e.message || '' },
].filter(Boolean);

const newestFirst = (a, b) => {
  const ta = a.lastTimestamp || a.metadata.creationTimestamp || '';
  const tb = b.lastTimestamp || b.metadata.creationTimestamp || '';
  return ta < tb ? 1 : ta > tb ? -1 : 0;
};

export function eventsPage(main, ctx) {
  const p = new Page(main);
  p.heading('Events', el('span', { class: 'muted' }, ctx.ns ? ` in ${ctx.ns}` : ' in all namespaces'));
  const t = p.table(p.live(R.events, ctx.ns), eventColumns(true), { what: 'events', compare: newestFirst });
  main.append(t.root);
  return p;
}

function eventsOf(p, ns, kind, name) {
  const t = p.table(p.live(R.events, ns, { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` }),
    eventColumns(false), { what: 'events', name: 'events', short: true, compare: newestFirst });
  return [el('h2', null, 'Events'), t.root];
}

function conditionsTable(conds) {
  return smallTable(['Type', 'Status', 'Reason', 'Message', 'Last transition'],
    (conds || []).map((c) => [c.type, el('span', { class: c.status === 'True' === ['Ready', 'Available', 'Progressing', 'Updated'].includes(c.type) ? 'ok' : 'bad' }, c.status), c.reason, c.message, f.age(c.lastTransitionTime) + ' ago']));
}

// single shows one object, re-rendered whenever it changes.
function single(p, res, ns, name, what, render) {
  const box = el('div', { 'data-object': name });
  const c = p.live(res, ns, { fieldSelector: `metadata.name=${name}` });
  p.follow(c, () => {
    if (c.error) { box.replaceChildren(problem(c.error, what)); return; }
    const o = c.items.get(ns ? `${ns}/${name}` : name);
    if (!o) { box.replaceChildren(el('div', { class: 'notice' }, c.loaded ? `${what} ${name} does not exist (any more).` : 'loading…')); return; }
    box.replaceChildren(...render(o));
  });
  return box;
}

export function nodePage(main, ctx, name) {
  const p = new Page(main);
  p.heading('Node ', name);
  main.append(single(p, R.nodes, '', name, 'nodes', (n) => {
    const info = (n.status && n.status.nodeInfo) || {};
    return [
      kv([['Status', el('span', { class: f.statusClass(f.nodeStatus(n)) }, f.nodeStatus(n))], ['Roles', f.nodeRoles(n)], ['Zone', f.zoneOf(n) || '<none>'],
        ['Pressure', f.pressure(n)], ['Taints', f.taints(n)], ['Pod CIDR', n.spec.podCIDR || ''],
        ['Addresses', ((n.status && n.status.addresses) || []).map((a) => `${a.type}=${a.address}`).join(' ')],
        ['Agent', `${info.kubeletVersion || ''} ${info.osImage || ''} ${info.architecture || ''}`],
        ['Labels', Object.entries(n.metadata.labels || {}).map(([k, v]) => `${k}=${v}`).join(' ')]]),
      el('h2', null, 'Conditions'), conditionsTable(n.status && n.status.conditions),
    ];
  }));
  main.append(el('h2', null, 'Pods on this node'));
  const t = p.table(p.live(R.pods, '', { fieldSelector: `spec.nodeName=${name}` }), podColumns(false), { what: 'pods', name: 'pods', short: true, onClick: openPod });
  main.append(t.root);
  return p;
}

export function podPage(main, ctx, ns, name) {
  const p = new Page(main);
  p.heading('Pod ', `${ns}/${name}`);
  let containers = [];
  const select = el('select', { 'aria-label': 'container' });
  main.append(single(p, R.pods, ns, name, 'pods', (pod) => {
    const names = pod.spec.containers.map((c) => c.name);
    if (names.join() !== containers.join()) {
      containers = names;
      select.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    }
    const cs = new Map(((pod.status && pod.status.containerStatuses) || []).map((c) => [c.name, c]));
    return [
      kv([['Status', el('span', { class: f.statusClass(f.podStatus(pod)) }, f.podStatus(pod))], ['Node', pod.spec.nodeName || '<not scheduled>'],
        ['IP', (pod.status && pod.status.podIP) || ''], ['Owner', (() => { const o = f.ownerOf(pod); return o ? `${o.kind}/${o.name}` : '<none>'; })()],
        ['Labels', Object.entries(pod.metadata.labels || {}).map(([k, v]) => `${k}=${v}`).join(' ')]]),
      el('h2', null, 'Containers'),
      smallTable(['Name', 'Image', 'Ready', 'State', 'Restarts'], pod.spec.containers.map((c) => {
        const s = cs.get(c.name) || {};
        const state = s.state ? Object.keys(s.state)[0] || '' : '';
        return [c.name, c.image, s.ready ? 'true' : 'false', state, s.restartCount || 0];
      })),
      el('h2', null, 'Conditions'), conditionsTable(pod.status && pod.status.conditions),
    ];
  }));
  main.append(...eventsOf(p, ns, 'Pod', name));
  main.append(logsView(p, ns, name, select));
  return p;
}

// logsView reads a container's log through the API's log route (the
// server proxies it from the node's agent), the last 500 lines, or
// follows it.
function logsView(p, ns, name, select) {
  const out = el('pre', { class: 'logs', 'data-logs': name });
  let ctl = null;
  const stopStream = () => { if (ctl) ctl.abort(); ctl = null; };
  p.onStop(stopStream);
  const load = async (follow) => {
    stopStream();
    ctl = new AbortController();
    const q = new URLSearchParams({ tailLines: '500' });
    if (select.value) q.set('container', select.value);
    if (follow) q.set('follow', 'true');
    out.textContent = '';
    try {
      const resp = await fetchAPI(resourcePath(R.pods, ns, name) + '/log?' + q, { signal: ctl.signal });
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        out.append(value);
        // Keep the newest 1 MiB of text: a followed log must not grow the tab for ever.
        if (out.textContent.length > 1 << 20) out.textContent = out.textContent.slice(-(1 << 19));
        out.scrollTop = out.scrollHeight;
      }
    } catch (e) {
      if (e.name !== 'AbortError') out.textContent = `Cannot read the log: ${e.message}`;
    }
  };
  const follow = el('input', { type: 'checkbox' });
  follow.addEventListener('change', () => load(follow.checked));
  select.addEventListener('change', () => load(follow.checked));
  const reload = el('button', { type: 'button', onclick: () => load(follow.checked) }, 'Reload');
  // The first load waits until the pod's containers are known.
  let started = false;
  const tryStart = () => {
    if (started) return;
    if (select.options.length) { started = true; load(false); } else requestAnimationFrame(tryStart);
  };
  const wait = setTimeout(tryStart, 0);
  p.onStop(() => clearTimeout(wait));
  return el('div', { class: 'logbox' }, el('h2', null, 'Logs'),
    el('div', { class: 'toolbar' }, el('label', null, 'Container ', select), el('label', null, follow, ' follow'), reload), out);
}

export function workloadPage(main, ctx, kind, ns, name) {
  const w = workloadKinds[kind];
  const p = new Page(main);
  p.heading(`${w.kind} `, `${ns}/${name}`);
  let uid = '';
  // owners are the UIDs whose pods this page lists: the object's own, or
  // a deployment's replica sets'.
  const owners = new Set();
  const pods = p.live(R.pods, ns);
  const podFilter = (pod) => { const o = f.ownerOf(pod); return !!o && owners.has(o.uid); };
  const podTable = p.table(pods, podColumns(true, true), { what: 'pods', name: 'pods', short: true, onClick: openPod, filter: podFilter });
  const rss = kind === 'deployment' ? p.live(R.replicasets, ns) : null;
  const ownedRS = (r) => { const o = f.ownerOf(r, 'Deployment'); return !!o && o.uid === uid; };
  const rsTable = rss && p.table(rss, replicaSetColumns.filter((c) => c !== nsCol), { what: 'replica sets', name: 'replicasets', short: true, onClick: openWorkload('replicaset'), filter: ownedRS });
  const recompute = () => {
    const before = [...owners].join();
    owners.clear();
    if (rss) { for (const r of rss.values()) if (ownedRS(r)) owners.add(r.metadata.uid); } else if (uid) owners.add(uid);
    if ([...owners].join() !== before) podTable.setFilter(podFilter);
  };
  main.append(single(p, w.res, ns, name, w.plural, (o) => {
    if (o.metadata.uid !== uid) {
      uid = o.metadata.uid;
      if (rsTable) rsTable.setFilter(ownedRS);
      recompute();
    }
    const s = o.status || {};
    const rows = [['Images', f.images(o.spec.template)], ['Selector', Object.entries((o.spec.selector && o.spec.selector.matchLabels) || {}).map(([k, v]) => `${k}=${v}`).join(',')]];
    if (kind === 'deployment') {
      rows.unshift(['Replicas', `${o.spec.replicas ?? 1} desired, ${s.updatedReplicas || 0} updated, ${s.replicas || 0} total, ${s.availableReplicas || 0} available, ${s.unavailableReplicas || 0} unavailable`],
        ['Strategy', (o.spec.strategy && o.spec.strategy.type) || 'RollingUpdate'], ['Revision', (o.metadata.annotations || {})['deployment.kubernetes.io/revision'] || '']);
    } else if (kind === 'replicaset') {
      rows.unshift(['Replicas', `${o.spec.replicas ?? 1} desired, ${s.replicas || 0} current, ${s.readyReplicas || 0} ready`]);
    } else {
      rows.unshift(['Nodes', `${s.desiredNumberScheduled || 0} desired, ${s.currentNumberScheduled || 0} current, ${s.numberReady || 0} ready, ${s.updatedNumberScheduled || 0} up-to-date`]);
    }
    return [kv(rows), el('h2', null, 'Conditions'), conditionsTable(s.conditions)];
  }));
  if (rss) {
    p.follow(rss, recompute);
    main.append(el('h2', null, 'Replica sets'), rsTable.root);
  }
  main.append(el('h2', null, 'Pods'), podTable.root);
  main.append(...eventsOf(p, ns, w.kind, name));
  return p;
}
