// Live collections and the tables that show them. A table renders only
// the rows in view (plus a few), reusing their elements, and at most once
// per animation frame however many watch events arrive: 10,000 pods cost
// what 40 rows cost.

import { watch } from './api.js';

export const keyOf = (o) => (o.metadata.namespace ? o.metadata.namespace + '/' : '') + o.metadata.name;

// Collection is a live map of objects fed by a watch; views subscribe to it.
export class Collection {
  constructor() {
    this.items = new Map();
    this.views = new Set();
    this.loaded = false;
    this.error = null;
  }
  reset(items) {
    this.items = new Map(items.map((o) => [keyOf(o), o]));
    this.loaded = true;
    this.changed(true);
  }
  apply(type, obj) {
    const k = keyOf(obj);
    const had = this.items.has(k);
    if (type === 'DELETED') this.items.delete(k);
    else this.items.set(k, obj);
    this.changed(type === 'DELETED' || !had, k);
  }
  fail(err) {
    this.error = err;
    this.loaded = true;
    this.changed(true);
  }
  changed(structural, key) { for (const v of this.views) v.changed(structural, key); }
  subscribe(view) { this.views.add(view); view.changed(true); return () => this.views.delete(view); }
  values() { return this.items.values(); }
  // watch starts feeding the collection; it returns the stop function.
  watch(res, ns, sel) {
    return watch(res, ns, sel, {
      reset: (items) => { this.error = null; this.reset(items); },
      event: (t, o) => this.apply(t, o),
      fail: (e) => this.fail(e),
    });
  }
}

// el makes an element: el('td', {class: 'x'}, 'text', child...). Text is
// always set as text, never parsed as HTML, so an object's fields cannot
// inject markup.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// notice is the message shown instead of a table that cannot be had.
export function problem(err, what) {
  if (err && err.status === 403) {
    return el('div', { class: 'notice forbidden', 'data-forbidden': what }, `Not permitted: this token may not list ${what}. `, el('span', { class: 'muted' }, err.message));
  }
  return el('div', { class: 'notice error' }, `Cannot list ${what}: ${err ? err.message : 'unknown error'}`);
}

const OVERSCAN = 10;

// VirtualTable shows a Collection. columns: [{title, width, text(o), cls(o)}].
// opts: filter(o) → bool, compare(a, b), onClick(o), short (a fixed height),
// what (a plural noun for counts and notices), name (for tests).
export class VirtualTable {
  constructor(coll, columns, opts = {}) {
    this.coll = coll;
    this.columns = columns;
    this.opts = opts;
    this.keys = [];
    this.dirtyKeys = true;
    this.scheduled = false;
    this.rowHeight = 28;
    this.rows = [];
    this.firstRendered = false;
    this.root = el('div', { class: 'tablebox' + (opts.short ? ' short' : ''), 'data-table': opts.name || opts.what });
    this.count = el('span', { class: 'count' });
    this.note = el('div');
    this.box = el('div', { class: 'vt' + (opts.short ? ' short' : '') });
    const head = el('tr', null, ...columns.map((c) => {
      const th = el('th', null, c.title);
      if (c.width) th.style.width = c.width;
      return th;
    }));
    this.tbody = el('tbody');
    this.top = el('tr', { class: 'spacer' }, el('td', { colspan: columns.length }));
    this.bottom = el('tr', { class: 'spacer' }, el('td', { colspan: columns.length }));
    this.tbody.append(this.top, this.bottom);
    this.box.append(el('table', null, el('thead', null, head), this.tbody));
    this.box.addEventListener('scroll', () => this.schedule(false));
    this.root.append(el('div', { class: 'toolbar' }, this.count), this.note, this.box);
    this.unsubscribe = coll.subscribe(this);
    this.resize = new ResizeObserver(() => this.schedule(false));
    this.resize.observe(this.box);
  }
  setFilter(filter) { this.opts.filter = filter; this.changed(true); }
  changed(structural) {
    if (structural) this.dirtyKeys = true;
    this.schedule();
  }
  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => { this.scheduled = false; this.render(); });
  }
  destroy() { this.unsubscribe(); this.resize.disconnect(); }
  sorted() {
    const f = this.opts.filter;
    const list = [];
    for (const o of this.coll.values()) if (!f || f(o)) list.push(o);
    const cmp = this.opts.compare || ((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
    list.sort(cmp);
    return list.map(keyOf);
  }
  render() {
    const c = this.coll;
    const what = this.opts.what || 'objects';
    if (c.error) {
      this.note.replaceChildren(problem(c.error, what));
      this.box.hidden = true;
      this.count.textContent = '';
      return;
    }
    this.note.replaceChildren();
    this.box.hidden = false;
    if (this.dirtyKeys) {
      this.keys = this.sorted();
      this.dirtyKeys = false;
    }
    const n = this.keys.length;
    this.count.textContent = c.loaded ? `${n} ${what}` : `loading ${what}…`;
    const h = this.rowHeight;
    // Never more than a window's worth, even if a style lets the box grow.
    const view = Math.min(this.box.clientHeight || 600, window.innerHeight);
    const first = Math.max(0, Math.floor(this.box.scrollTop / h) - OVERSCAN);
    const last = Math.min(n, Math.ceil((this.box.scrollTop + view) / h) + OVERSCAN);
    const want = last - first;
    while (this.rows.length < want) {
      const tr = el('tr', { class: 'row' }, ...this.columns.map(() => el('td')));
      tr.addEventListener('click', () => { if (tr.obj && this.opts.onClick) this.opts.onClick(tr.obj); });
      this.rows.push(tr);
    }
    while (this.rows.length > want) this.rows.pop().remove();
    this.top.style.height = first * h + 'px';
    this.bottom.style.height = (n - last) * h + 'px';
    for (let i = 0; i < want; i++) {
      const tr = this.rows[i];
      const o = c.items.get(this.keys[first + i]);
      tr.obj = o;
      tr.dataset.key = this.keys[first + i];
      if (!tr.isConnected || tr.previousSibling !== (i === 0 ? this.top : this.rows[i - 1])) {
        this.bottom.before(tr);
      }
      if (!o) continue;
      for (let j = 0; j < this.columns.length; j++) {
        const col = this.columns[j];
        const td = tr.children[j];
        const text = String(col.text(o) ?? '');
        if (td.textContent !== text) td.textContent = text;
        td.title = text;
        const cls = col.cls ? col.cls(o) || '' : '';
        if (td.className !== cls) td.className = cls;
      }
    }
    if (c.loaded && !this.firstRendered) {
      this.firstRendered = true;
      this.root.dataset.rendered = 'true';
      if (this.opts.onFirstRender) this.opts.onFirstRender(n);
    }
  }
}

// SmallTable renders a plain table of a few rows in full (conditions,
// history): nothing to virtualize.
export function smallTable(headers, rows) {
  return el('table', { class: 'plain' },
    el('thead', null, el('tr', null, ...headers.map((h) => el('th', null, h)))),
    el('tbody', null, ...rows.map((r) => el('tr', null, ...r.map((c) => (c instanceof Node ? el('td', null, c) : el('td', null, c ?? '')))))));
}

export function kv(pairs) {
  return el('table', { class: 'plain kv' }, el('tbody', null,
    ...pairs.filter((p) => p).map(([k, v]) => el('tr', null, el('th', null, k), el('td', null, v instanceof Node ? v : String(v ?? ''))))));
}
