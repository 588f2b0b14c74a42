// Every call to Caravan's HTTP API: the same public `/v1` endpoints any
// client uses, each sent with the browser's ACL token (X-Nomad-Token).

import { needFor } from './acl.js';

const TOKEN_KEY = 'caravan.token';

/** The ACL token this browser signed in with, kept in localStorage as Nomad's UI keeps its own. */
export const token = {
  get secret() {
    return localStorage.getItem(TOKEN_KEY) || '';
  },
  set(secret) {
    localStorage.setItem(TOKEN_KEY, secret);
    window.dispatchEvent(new Event('caravan:token'));
  },
  clear() {
    localStorage.removeItem(TOKEN_KEY);
    window.dispatchEvent(new Event('caravan:token'));
  },
};

/** A refused or failed call: the status, the server's message, and for a 403 the capability it needs. */
export class ApiError extends Error {
  constructor(status, message, method, url) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.method = method;
    this.url = url;
    this.need = status === 403 ? needFor(method, url) : null;
  }
}

/** `path` with `query`'s set values appended. */
export function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  }
  const qs = params.toString();
  if (!qs) return path;
  return path + (path.includes('?') ? '&' : '?') + qs;
}

function headers(json) {
  const h = {};
  const secret = token.secret;
  if (secret) h['X-Nomad-Token'] = secret;
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

/** Sends a request and returns its response, throwing ApiError unless it succeeded. */
export async function send(method, path, { body, query, signal } = {}) {
  const url = withQuery(path, query);
  const json = body !== undefined && typeof body !== 'string';
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : json ? JSON.stringify(body) : body,
      signal,
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, `the gateway did not answer: ${err.message}`, method, url);
  }
  if (!res.ok) {
    const text = (await res.text().catch(() => '')).trim();
    throw new ApiError(res.status, text, method, url);
  }
  return res;
}

/** Calls the API and decodes the answer: `{data, index}` (index from X-Nomad-Index). */
export async function call(method, path, options = {}) {
  const res = await send(method, path, options);
  const index = Number(res.headers.get('X-Nomad-Index') || 0);
  const type = res.headers.get('Content-Type') || '';
  const text = await res.text();
  const data = type.includes('json') && text ? JSON.parse(text) : text;
  return { data, index };
}

/** GET, answering the decoded body. */
export async function get(path, query, signal) {
  return (await call('GET', path, { query, signal })).data;
}

/** POST with a JSON body. */
export async function post(path, body, query) {
  return (await call('POST', path, { body: body ?? {}, query })).data;
}

/** PUT with a JSON body. */
export async function put(path, body, query) {
  return (await call('PUT', path, { body: body ?? {}, query })).data;
}

/** DELETE. */
export async function del(path, query) {
  return (await call('DELETE', path, { query })).data;
}

/** A job's URL segment: its id escaped for a path. */
export function jobPath(id) {
  return `/v1/job/${encodeURIComponent(id)}`;
}
