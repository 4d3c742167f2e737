// The public /v1/agl API, called with fetch. The bearer token (when the server has one) is asked for
// once and kept in sessionStorage: it lives as long as this tab and is never written to the URL.

const TOKEN_KEY = "agl.dashboard.token";
export const API = "/v1/agl";

/** An HTTP error from the API, with the server's typed error when it sent one. */
export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) for (const v of value) search.append(key, String(v));
    else search.append(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** GET path (relative to /v1/agl) with query params; resolves to the parsed JSON. */
export async function get(path, params) {
  const headers = { Accept: "application/json" };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(API + path + query(params), { headers, credentials: "same-origin" });
  if (!response.ok) {
    let type = "HTTPError";
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body && body.error) {
        type = String(body.error.type);
        message = String(body.error.message);
      }
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, type, message);
  }
  return response.json();
}

/** All pages of a paginated GET (limit per page), calling onPage(items, total) as they arrive. */
export async function getAll(path, params, pageSize, onPage) {
  const items = [];
  let offset = 0;
  for (;;) {
    const page = await get(path, { ...params, limit: pageSize, offset });
    items.push(...page.items);
    if (onPage) onPage(page.items, page.total);
    offset += page.items.length;
    if (page.items.length === 0 || offset >= page.total) return items;
  }
}

/** Run fn over items with at most `limit` calls in flight; results in order. */
export async function mapLimited(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** The newest rollouts first, in the store's creation order: `limit` of them after skipping `skip` newer
 *  ones. The store pages in creation order (fast on any size), so this takes the slice at the end and
 *  reverses it. Resolves to {items, total}. */
export async function newestRollouts(filters, limit, skip = 0) {
  const { total } = await get("/rollouts", { ...filters, limit: 1 });
  const end = Math.max(0, total - skip);
  const start = Math.max(0, end - limit);
  if (end === 0) return { items: [], total };
  const slice = await get("/rollouts", { ...filters, limit: end - start, offset: start });
  return { items: slice.items.reverse(), total: Math.max(total, slice.total) };
}
