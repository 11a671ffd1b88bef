// The console's only way to the control plane: same-origin fetches under /v1 with the session
// cookie, the CSRF header on every write, and problem+json errors turned into ApiError.
import type { Page } from './types';

/** An answer other than 2xx: the problem+json fields, `detail` being what the user reads. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly requestId: string | undefined;
  readonly retryAfter: number | undefined;

  constructor(status: number, code: string, title: string, detail: string, requestId?: string,
              retryAfter?: number) {
    super(detail || title || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.title = title;
    this.detail = detail;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
  }
}

/** What to tell the user about any failure. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    let text = err.detail || err.title || `The request failed (HTTP ${err.status}).`;
    if (err.code === 'rate_limited' && err.retryAfter !== undefined)
      text += ` Try again in ${err.retryAfter} s.`;
    return text;
  }
  if (err instanceof Error) return err.message;
  return String(err);
}

type Unauthenticated = () => void;
let onUnauthenticated: Unauthenticated = () => {};

/** Called when a request other than the login itself is answered 401 (session gone). */
export function setUnauthenticatedHandler(handler: Unauthenticated): void {
  onUnauthenticated = handler;
}

/** The gp_csrf cookie: the value every write must echo in X-CSRF-Token. */
export function csrfToken(): string | undefined {
  for (const part of document.cookie.split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === 'gp_csrf') {
      const value = rest.join('=');
      return value === '' ? undefined : decodeURIComponent(value);
    }
  }
  return undefined;
}

export type Query = Record<string, string | number | boolean | null | undefined>;

/** `path` with the query's set values appended. */
export function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query))
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${path}${path.includes('?') ? '&' : '?'}${qs}` : path;
}

/** A path segment, escaped. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

export interface RequestOptions {
  /** Don't report a 401 to the unauthenticated handler (login, whoami at start). */
  quiet401?: boolean;
  signal?: AbortSignal;
}

export async function request<T>(method: string, path: string, body?: unknown,
                                 options: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') {
    const csrf = csrfToken();
    if (csrf) headers['X-CSRF-Token'] = csrf;
  }
  let res: Response;
  try {
    const init: RequestInit = { method, headers, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) init.body = JSON.stringify(body);
    if (options.signal) init.signal = options.signal;
    res = await fetch(path, init);
  } catch (err) {
    if (err instanceof DOMException && err.name === 'AbortError') throw err;
    throw new ApiError(0, 'unreachable', 'Unreachable',
                       'The control plane could not be reached. Check your connection and retry.');
  }
  if (res.status === 204) return undefined as T;
  const type = res.headers.get('Content-Type') ?? '';
  const isJson = type.includes('json');
  if (!res.ok) {
    let problem: Record<string, unknown> = {};
    if (isJson) {
      try {
        problem = (await res.json()) as Record<string, unknown>;
      } catch {
        problem = {};
      }
    }
    const str = (k: string): string => (typeof problem[k] === 'string' ? (problem[k] as string) : '');
    const retry = Number(res.headers.get('Retry-After'));
    const err = new ApiError(res.status, str('code') || `http_${res.status}`,
                             str('title') || res.statusText, str('detail'),
                             str('request_id') || res.headers.get('X-Request-Id') || undefined,
                             Number.isFinite(retry) && retry > 0 ? retry : undefined);
    if (res.status === 401 && !options.quiet401) onUnauthenticated();
    throw err;
  }
  if (!isJson) return (await res.text()) as T;
  return (await res.json()) as T;
}

export function get<T>(path: string, query?: Query, options?: RequestOptions): Promise<T> {
  return request<T>('GET', withQuery(path, query), undefined, options);
}

export function post<T>(path: string, body?: unknown, options?: RequestOptions): Promise<T> {
  return request<T>('POST', path, body ?? {}, options);
}

export function del<T = void>(path: string): Promise<T> {
  return request<T>('DELETE', path);
}

/** One page of a list: `?limit` and `?after` in, `{items, next}` out. */
export function list<T>(path: string, after: string | null, limit: number,
                        query?: Query): Promise<Page<T>> {
  return get<Page<T>>(path, { ...query, limit, after });
}

/** Every page of a list, up to `max` items (for lookups such as project names). */
export async function listAll<T>(path: string, max = 1000, query?: Query): Promise<T[]> {
  const out: T[] = [];
  let after: string | null = null;
  do {
    const page: Page<T> = await list<T>(path, after, Math.min(1000, max - out.length), query);
    out.push(...page.items);
    after = page.next;
  } while (after && out.length < max);
  return out;
}
