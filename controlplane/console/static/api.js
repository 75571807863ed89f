// The API as the console uses it: every call carries the user's token in
// the Authorization header (never in a URL, which logs and history keep),
// and lists are kept live the way `outpost get -w` does: list, then watch
// from the list's resourceVersion, list again after 410 Gone.

const TOKEN = 'outpost.token';
const NAMESPACE = 'outpost.namespace';

export const session = {
  token: () => sessionStorage.getItem(TOKEN) || '',
  setToken: (t) => sessionStorage.setItem(TOKEN, t),
  namespace: () => sessionStorage.getItem(NAMESPACE) || '',
  setNamespace: (ns) => ns ? sessionStorage.setItem(NAMESPACE, ns) : sessionStorage.removeItem(NAMESPACE),
  clear: () => { sessionStorage.removeItem(TOKEN); sessionStorage.removeItem(NAMESPACE); },
};

// APIError is a refused or failed call; status is the HTTP status (0 when
// the server could not be reached).
export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
  get forbidden() { return this.status === 403; }
}

// onUnauthorized is called when the server refuses the token (401).
let unauthorized = () => {};
export function onUnauthorized(fn) { unauthorized = fn; }

function headers() {
  return { Authorization: 'Bearer ' + session.token(), Accept: 'application/json' };
}

async function errorOf(resp) {
  let msg = resp.statusText || ('HTTP ' + resp.status);
  try {
    const st = await resp.json();
    if (st && st.message) msg = st.message;
  } catch (_) { /* not a Status */ }
  if (resp.status === 401) unauthorized();
  return new APIError(resp.status, msg);
}

export async function fetchAPI(path, { signal } = {}) {
  let resp;
  try {
    resp = await fetch(path, { headers: headers(), signal, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new APIError(0, 'the server cannot be reached: ' + e.message);
  }
  if (!resp.ok) throw await errorOf(resp);
  return resp;
}

export async function get(path, opts) {
  return (await fetchAPI(path, opts)).json();
}

// resourcePath is the URL of a resource's list, as the Go client's PathFor.
export function resourcePath(res, ns, name) {
  const base = res.group ? `/apis/${res.group}/${res.version}` : `/api/${res.version}`;
  let p = base;
  if (res.namespaced && ns) p += `/namespaces/${encodeURIComponent(ns)}`;
  p += '/' + res.plural;
  if (name) p += '/' + encodeURIComponent(name);
  return p;
}

export const R = {
  namespaces: { version: 'v1', plural: 'namespaces' },
  nodes: { version: 'v1', plural: 'nodes' },
  pods: { version: 'v1', plural: 'pods', namespaced: true },
  events: { version: 'v1', plural: 'events', namespaced: true },
  deployments: { group: 'apps', version: 'v1', plural: 'deployments', namespaced: true },
  replicasets: { group: 'apps', version: 'v1', plural: 'replicasets', namespaced: true },
  daemonsets: { group: 'apps', version: 'v1', plural: 'daemonsets', namespaced: true },
  machines: { group: 'machine.openshift.io', version: 'v1beta1', plural: 'machines' },
  machinesets: { group: 'machine.openshift.io', version: 'v1beta1', plural: 'machinesets' },
  cpms: { group: 'machine.openshift.io', version: 'v1beta1', plural: 'controlplanemachinesets' },
  pools: { group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'machineconfigpools' },
  clusterversions: { group: 'config.openshift.io', version: 'v1', plural: 'clusterversions' },
};

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// The watches' connection state, for the header: live, reconnecting
// (some watch lost its stream and retries), or nothing to say.
const liveWatches = new Set();
const retrying = new Set();
let statusFn = () => {};
export function onWatchStatus(fn) { statusFn = fn; }
function setLive(id, state) {
  liveWatches.delete(id);
  retrying.delete(id);
  if (state === 'live') liveWatches.add(id);
  if (state === 'retrying') retrying.add(id);
  statusFn(retrying.size > 0 ? 'reconnecting' : liveWatches.size > 0 ? 'live' : '');
}

let watchIDs = 0;

// watch keeps a list live. It calls reset(items) with the whole list
// (first, and again after the watch fell behind), then event(type, obj)
// for each change; fail(err) once for a refusal that retrying cannot mend
// (401, 403, 404), after which it stops. Other errors are retried with
// backoff. It returns the function that stops it.
export function watch(res, ns, { fieldSelector, labelSelector } = {}, { reset, event, fail }) {
  const ctl = new AbortController();
  const signal = ctl.signal;
  const id = ++watchIDs;
  const path = resourcePath(res, res.namespaced ? ns : '');
  const sel = { fieldSelector, labelSelector };
  (async () => {
    let rv = '';
    let backoff = 250;
    while (!signal.aborted) {
      try {
        if (!rv) {
          const list = await get(path + query(sel), { signal });
          rv = list.metadata.resourceVersion;
          reset(list.items || []);
        }
        const resp = await fetchAPI(path + query({ ...sel, watch: 'true', resourceVersion: rv }), { signal });
        setLive(id, 'live');
        backoff = 250;
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let nl;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            if (!line.trim()) continue;
            const ev = JSON.parse(line);
            if (ev.type === 'ERROR') {
              const st = ev.object || {};
              throw new APIError(st.code || 500, st.message || 'watch error');
            }
            const objRV = ev.object && ev.object.metadata && ev.object.metadata.resourceVersion;
            if (objRV) rv = objRV;
            if (ev.type !== 'BOOKMARK') event(ev.type, ev.object);
          }
        }
        // The server ended the stream (a timeout, a restart): go on from rv.
      } catch (e) {
        setLive(id, '');
        if (signal.aborted) break;
        if (e instanceof APIError && [401, 403, 404].includes(e.status)) {
          fail(e);
          break;
        }
        setLive(id, 'retrying');
        if (e instanceof APIError && e.status === 410) rv = '';
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 8000);
      }
    }
    setLive(id, '');
  })();
  return () => ctl.abort();
}

// poll calls fn now and every interval ms until stopped, for what the API
// cannot watch (raft membership, zones).
export function poll(interval, fn) {
  const ctl = new AbortController();
  (async () => {
    while (!ctl.signal.aborted) {
      try { await fn(ctl.signal); } catch (e) { if (e.name === 'AbortError') return; }
      await sleep(interval, ctl.signal);
    }
  })();
  return () => ctl.abort();
}
