// The cluster's own pages: the control plane's raft members and failure
// domains, machines, machine config pools and the cluster version. Most
// of these are admin-only; a token that may not read one sees "Not
// permitted" in its place.

import { R, get, poll } from './api.js';
import { Page, } from './pages.js';
import { el, kv, problem, smallTable } from './table.js';
import * as f from './format.js';

// polled shows what the API serves but cannot watch (raft membership,
// zones), read again every few seconds.
function polled(p, path, what, render) {
  const box = el('div', { 'data-polled': what }, el('div', { class: 'muted' }, 'loading…'));
  p.onStop(poll(3000, async (signal) => {
    try {
      const v = await get(path, { signal });
      box.replaceChildren(...render(v));
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      box.replaceChildren(problem(e, what));
    }
  }));
  return box;
}

// watched shows a whole (small) list, re-rendered when any item changes.
function watched(p, res, what, render) {
  const box = el('div', { 'data-watched': what }, el('div', { class: 'muted' }, 'loading…'));
  const c = p.live(res, '');
  p.follow(c, () => {
    if (c.error) { box.replaceChildren(problem(c.error, what)); return; }
    if (!c.loaded) return;
    const items = [...c.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
    box.replaceChildren(...render(items));
  });
  return box;
}

export function controlPlanePage(main) {
  const p = new Page(main);
  p.heading('Control plane');
  main.append(el('h2', null, 'Raft members'), polled(p, '/apis/outpost.io/v1/raft/peers', 'raft members', (l) => [
    smallTable(['ID', 'Raft address', 'API', 'Suffrage', 'Leader', 'Last index', 'Reachable', 'Version'],
      (l.items || []).map((m) => [m.id, m.address, m.apiAddr || '', m.suffrage, m.leader ? 'leader' : '', m.lastIndex,
        el('span', { class: m.reachable ? 'ok' : 'bad' }, m.reachable ? 'yes' : `no ${m.error || ''}`), m.version || ''])),
  ]));
  main.append(el('h2', null, 'Zones'), polled(p, '/apis/outpost.io/v1/zones', 'zones', (l) => [
    smallTable(['Zone', 'State', 'Nodes', 'Ready'], (l.items || l.zones || []).map((z) => [z.name || z.zone || '', z.state || '', z.nodes ?? '', z.readyNodes ?? z.ready ?? ''])),
  ]));
  main.append(el('h2', null, 'Control plane machine sets (failure domains)'), watched(p, R.cpms, 'control plane machine sets', (items) => [
    items.length ? smallTable(['Name', 'Replicas', 'State', 'Strategy', 'Failure domains', 'Ready', 'Updated'], items.map((c) => [
      c.metadata.name, c.spec.replicas ?? '', c.spec.state || '', (c.spec.strategy && c.spec.strategy.type) || '',
      c.spec.failureDomains && c.spec.failureDomains.labelKey ? `${c.spec.failureDomains.labelKey}: ${(c.spec.failureDomains.names || []).join(', ')}` : '<none>',
      (c.status && c.status.readyReplicas) || 0, (c.status && c.status.updatedReplicas) || 0])) : el('div', { class: 'muted' }, 'none'),
  ]));
  return p;
}

const hooks = (l) => (l || []).map((h) => `${h.name} (${h.owner})`).join(', ') || '<none>';

export function machinesPage(main) {
  const p = new Page(main);
  p.heading('Machines');
  main.append(watched(p, R.machines, 'machines', (items) => [
    items.length ? smallTable(['Name', 'Phase', 'Node', 'Pre-drain hooks', 'Pre-terminate hooks', 'Age'], items.map((m) => [
      m.metadata.name, el('span', { class: m.status && m.status.phase === 'Running' ? 'ok' : 'warn' }, (m.status && m.status.phase) || ''),
      (m.status && m.status.nodeRef && m.status.nodeRef.name) || '',
      hooks(m.spec.lifecycleHooks && m.spec.lifecycleHooks.preDrain), hooks(m.spec.lifecycleHooks && m.spec.lifecycleHooks.preTerminate),
      f.age(m.metadata.creationTimestamp)])) : el('div', { class: 'muted' }, 'no machines'),
  ]));
  main.append(el('h2', null, 'Machine sets'), watched(p, R.machinesets, 'machine sets', (items) => [
    items.length ? smallTable(['Name', 'Desired', 'Current', 'Ready', 'Available'], items.map((s) => [
      s.metadata.name, s.spec.replicas ?? '', (s.status && s.status.replicas) || 0, (s.status && s.status.readyReplicas) || 0, (s.status && s.status.availableReplicas) || 0]))
      : el('div', { class: 'muted' }, 'no machine sets'),
  ]));
  return p;
}

const MC = 'machineconfiguration.openshift.io/';

export function poolsPage(main) {
  const p = new Page(main);
  p.heading('Machine config pools');
  const nodes = p.live(R.nodes, '');
  const box = watched(p, R.pools, 'machine config pools', (pools) => render(pools));
  // Per-node progress comes from the nodes' annotations, so a node's
  // change redraws the pools too.
  let last = [];
  const render = (pools) => {
    last = pools;
    if (!pools.length) return [el('div', { class: 'muted' }, 'no pools')];
    const out = [];
    for (const pool of pools) {
      const s = pool.status || {};
      const bar = el('progress', { max: s.machineCount || 1, value: s.updatedMachineCount || 0 });
      const c = (t) => { const x = f.cond(s.conditions, t); return x ? x.status : ''; };
      out.push(el('h2', null, pool.metadata.name),
        kv([['Config', (s.configuration && s.configuration.name) || ''], ['Progress', el('span', null, bar, ` ${s.updatedMachineCount || 0}/${s.machineCount || 0} updated`)],
          ['Machines', `${s.readyMachineCount || 0} ready, ${s.unavailableMachineCount || 0} unavailable, ${s.degradedMachineCount || 0} degraded`],
          ['Updated / Updating / Degraded', `${c('Updated')} / ${c('Updating')} / ${c('Degraded')}`], ['Paused', pool.spec.paused ? 'yes' : 'no']]));
      const members = nodes.error ? null : [...nodes.values()].filter((n) => f.selectorMatches(pool.spec.nodeSelector, n.metadata.labels))
        .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
      if (!members) { out.push(problem(nodes.error, 'nodes')); continue; }
      out.push(smallTable(['Node', 'Current config', 'Desired config', 'State', 'Updated'], members.map((n) => {
        const a = n.metadata.annotations || {};
        const done = a[MC + 'currentConfig'] && a[MC + 'currentConfig'] === ((s.configuration && s.configuration.name) || a[MC + 'desiredConfig']);
        return [n.metadata.name, a[MC + 'currentConfig'] || '', a[MC + 'desiredConfig'] || '', a[MC + 'state'] || '', el('span', { class: done ? 'ok' : 'warn' }, done ? 'yes' : 'no')];
      })));
    }
    return out;
  };
  p.follow(nodes, () => { if (last.length) box.replaceChildren(...render(last)); });
  main.append(box);
  return p;
}

export function versionPage(main) {
  const p = new Page(main);
  p.heading('Cluster version');
  main.append(watched(p, R.clusterversions, 'cluster versions', (items) => {
    if (!items.length) return [el('div', { class: 'muted' }, 'no ClusterVersion object')];
    return items.flatMap((cv) => {
      const s = cv.status || {};
      const d = s.desired || {};
      return [
        kv([['Name', cv.metadata.name], ['Version', d.version || ''], ['Image', d.image || ''], ['Channel', cv.spec.channel || ''],
          ['Upstream', cv.spec.upstream || ''], ['Desired update', cv.spec.desiredUpdate ? (cv.spec.desiredUpdate.version || cv.spec.desiredUpdate.image || '') : '<none>']]),
        el('h2', null, 'Conditions'),
        smallTable(['Type', 'Status', 'Reason', 'Message'], (s.conditions || []).map((c) => [c.type, c.status, c.reason || '', c.message || ''])),
        el('h2', null, 'Available updates'),
        (s.availableUpdates || []).length ? smallTable(['Version', 'Image', 'Channels'], s.availableUpdates.map((u) => [u.version || '', u.image || '', (u.channels || []).join(', ')]))
          : el('div', { class: 'muted' }, 'none'),
        (s.conditionalUpdates || []).length ? el('h2', null, 'Conditional updates') : '',
        (s.conditionalUpdates || []).length ? smallTable(['Version', 'Risks'], s.conditionalUpdates.map((u) => [(u.release && u.release.version) || '', (u.risks || []).map((r) => r.name).join(', ')])) : '',
        el('h2', null, 'History'),
        smallTable(['State', 'Version', 'Started', 'Completed', 'Verified'], (s.history || []).map((h) => [h.state, h.version, h.startedTime || '', h.completionTime || '', h.verified ? 'yes' : 'no'])),
      ];
    });
  }));
  return p;
}
