// How objects read in tables: the columns kubectl prints, in its words.

export function age(ts, now = Date.now()) {
  if (!ts) return '';
  let s = Math.max(0, Math.floor((now - Date.parse(ts)) / 1000));
  if (s < 120) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 120) return m + 'm';
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h';
  return Math.floor(h / 24) + 'd';
}

export const cond = (conds, type) => (conds || []).find((c) => c.type === type);

export function nodeStatus(n) {
  const r = cond(n.status && n.status.conditions, 'Ready');
  let s = !r ? 'Unknown' : r.status === 'True' ? 'Ready' : 'NotReady';
  if (n.spec && n.spec.unschedulable) s += ',SchedulingDisabled';
  return s;
}

export const statusClass = (s) => (s.startsWith('Ready') || s === 'Running' || s === 'Succeeded' || s === 'True' ? 'ok' : s === 'Pending' || s.startsWith('Container') || s === 'Terminating' ? 'warn' : 'bad');

export function nodeRoles(n) {
  const roles = Object.keys((n.metadata && n.metadata.labels) || {})
    .filter((k) => k.startsWith('node-role.kubernetes.io/'))
    .map((k) => k.slice('node-role.kubernetes.io/'.length));
  return roles.length ? roles.sort().join(',') : '<none>';
}

export const zoneOf = (n) => ((n.metadata && n.metadata.labels) || {})['topology.kubernetes.io/zone'] || '';

const PRESSURES = ['MemoryPressure', 'DiskPressure', 'PIDPressure', 'NetworkUnavailable'];
export function pressure(n) {
  const on = (n.status && n.status.conditions || []).filter((c) => PRESSURES.includes(c.type) && c.status === 'True').map((c) => c.type);
  return on.length ? on.join(',') : 'none';
}

export const taintText = (t) => `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}`;
export const taints = (n) => ((n.spec && n.spec.taints) || []).map(taintText).join(' ') || '<none>';

export function podReady(p) {
  const cs = (p.status && p.status.containerStatuses) || [];
  const total = ((p.spec && p.spec.containers) || []).length;
  return `${cs.filter((c) => c.ready).length}/${total}`;
}

export function podStatus(p) {
  if (p.metadata.deletionTimestamp) return 'Terminating';
  const st = p.status || {};
  for (const c of st.containerStatuses || []) {
    const s = c.state || {};
    if (s.waiting && s.waiting.reason) return s.waiting.reason;
    if (s.terminated && s.terminated.reason && st.phase !== 'Succeeded') return s.terminated.reason;
  }
  return st.reason || st.phase || 'Pending';
}

export const restarts = (p) => ((p.status && p.status.containerStatuses) || []).reduce((n, c) => n + (c.restartCount || 0), 0);

export const images = (tmpl) => ((tmpl && tmpl.spec && tmpl.spec.containers) || []).map((c) => c.image).join(',');

export const ownerOf = (o, kind) => ((o.metadata && o.metadata.ownerReferences) || []).find((r) => !kind || r.kind === kind);

export function selectorMatches(sel, labels) {
  if (!sel) return true;
  labels = labels || {};
  for (const [k, v] of Object.entries(sel.matchLabels || {})) if (labels[k] !== v) return false;
  for (const r of sel.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    const vals = r.values || [];
    switch (r.operator) {
      case 'In': if (!has || !vals.includes(labels[r.key])) return false; break;
      case 'NotIn': if (has && vals.includes(labels[r.key])) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
      default: return false;
    }
  }
  return true;
}
