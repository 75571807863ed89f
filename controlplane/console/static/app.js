// The console's shell: log in, the header, and a page per location hash.

import { APIError, R, get, onUnauthorized, onWatchStatus, resourcePath, session } from './api.js';
import { el } from './table.js';
import { eventsPage, nodePage, nodesPage, podPage, podsPage, workloadPage, workloadsPage } from './pages.js';
import { controlPlanePage, machinesPage, poolsPage, versionPage } from './cluster.js';

const $ = (id) => document.getElementById(id);
const main = $('main');
const loginForm = $('login');
let current = null;

const routes = [
  [/^\/nodes$/, (m, ctx) => nodesPage(m, ctx)],
  [/^\/node\/([^/]+)$/, (m, ctx, name) => nodePage(m, ctx, name)],
  [/^\/pods$/, (m, ctx) => podsPage(m, ctx)],
  [/^\/pod\/([^/]+)\/([^/]+)$/, (m, ctx, ns, name) => podPage(m, ctx, ns, name)],
  [/^\/workloads$/, (m, ctx) => workloadsPage(m, ctx)],
  [/^\/(deployment|replicaset|daemonset)\/([^/]+)\/([^/]+)$/, (m, ctx, kind, ns, name) => workloadPage(m, ctx, kind, ns, name)],
  [/^\/events$/, (m, ctx) => eventsPage(m, ctx)],
  [/^\/controlplane$/, (m) => controlPlanePage(m)],
  [/^\/machines$/, (m) => machinesPage(m)],
  [/^\/pools$/, (m) => poolsPage(m)],
  [/^\/version$/, (m) => versionPage(m)],
];

function leave() {
  if (current) current.stop();
  current = null;
  for (const c of [...main.children]) if (c !== loginForm) c.remove();
}

function show() {
  leave();
  if (!session.token()) { showLogin(''); return; }
  loginForm.hidden = true;
  for (const id of ['nav', 'nsbox', 'logout']) $(id).hidden = false;
  const path = location.hash.replace(/^#/, '') || '/nodes';
  for (const a of $('nav').querySelectorAll('a')) a.classList.toggle('active', path.startsWith(a.getAttribute('href').slice(1)));
  const ctx = { ns: session.namespace() };
  for (const [re, page] of routes) {
    const m = path.match(re);
    if (m) {
      current = page(main, ctx, ...m.slice(1).map(decodeURIComponent));
      return;
    }
  }
  main.append(el('div', { class: 'notice' }, 'No such page. ', el('a', { href: '#/nodes' }, 'Nodes')));
}

function showLogin(message) {
  leave();
  for (const id of ['nav', 'nsbox', 'logout']) $(id).hidden = true;
  loginForm.hidden = false;
  $('loginerr').textContent = message;
  $('token').focus();
}

loginForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const token = $('token').value.trim();
  session.setToken(token);
  session.setNamespace($('loginns').value.trim());
  try {
    // Any authenticated call tells a good token from a bad one; /api is
    // one every token may make.
    await get('/api');
  } catch (e) {
    session.clear();
    showLogin(e instanceof APIError && e.status === 401 ? 'The server refused this token.' : `Cannot log in: ${e.message}`);
    return;
  }
  $('token').value = '';
  $('ns').value = session.namespace();
  fillNamespaces();
  if (!location.hash) location.hash = '#/nodes'; else show();
});

$('logout').addEventListener('click', () => {
  session.clear();
  location.hash = '';
  showLogin('');
});

$('ns').addEventListener('change', () => {
  session.setNamespace($('ns').value.trim());
  show();
});

onUnauthorized(() => {
  if (!session.token()) return;
  session.clear();
  showLogin('The server no longer accepts this token; log in again.');
});

onWatchStatus((state) => {
  const c = $('conn');
  c.className = 'conn ' + (state === 'live' ? 'live' : state ? 'down' : '');
  c.textContent = state;
});

// fillNamespaces offers the namespaces to choose from, when the token may
// list them (a developer's may not, and types its own).
async function fillNamespaces() {
  try {
    const l = await get(resourcePath(R.namespaces));
    $('nslist').replaceChildren(...l.items.map((n) => el('option', { value: n.metadata.name })));
  } catch (_) { /* not permitted: the field stays free text */ }
}

window.addEventListener('hashchange', show);
$('ns').value = session.namespace();
if (session.token()) fillNamespaces();
show();
