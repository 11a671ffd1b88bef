// History-API routing under /console/: links with a /console/ href are followed in place, the
// back button works, and after each navigation focus goes to the new page's heading.
import { announce } from './status';

export const BASE = '/console';

export interface RouteContext {
  params: Record<string, string>;
  query: URLSearchParams;
  main: HTMLElement;
  /** Aborted when the user navigates away before the page finished. */
  signal: AbortSignal;
}

export interface Route {
  /** "/fleet/nodes/:node" (below /console). */
  pattern: string;
  render: (ctx: RouteContext) => Promise<void> | void;
}

type Resolver = (path: string) => { route: Route; params: Record<string, string> } | null;

let resolver: Resolver = () => null;
let notFound: Route | null = null;
let inflight: AbortController | null = null;
let beforeRender: (path: string) => Promise<string | null> = async () => null;

function compile(routes: Route[]): Resolver {
  const compiled = routes.map((route) => {
    const names: string[] = [];
    const re = new RegExp(
      '^' +
        route.pattern
          .split('/')
          .map((part) => {
            if (part.startsWith(':')) {
              names.push(part.slice(1));
              return '([^/]+)';
            }
            return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
          })
          .join('/') +
        '/?$',
    );
    return { route, names, re };
  });
  return (path) => {
    for (const c of compiled) {
      const m = c.re.exec(path);
      if (!m) continue;
      const params: Record<string, string> = {};
      c.names.forEach((n, i) => {
        params[n] = decodeURIComponent(m[i + 1] ?? '');
      });
      return { route: c.route, params };
    }
    return null;
  };
}

/** The app path (below /console) of the current location, e.g. "/fleet". */
export function currentPath(): string {
  const p = location.pathname;
  if (p === BASE || p === `${BASE}/`) return '/';
  return p.startsWith(`${BASE}/`) ? p.slice(BASE.length) : p;
}

/** A full URL path for an app path: href('/fleet') is "/console/fleet". */
export function href(path: string): string {
  return `${BASE}${path.startsWith('/') ? path : `/${path}`}`;
}

export async function navigate(path: string, options: { replace?: boolean } = {}): Promise<void> {
  const url = href(path);
  if (options.replace) history.replaceState(null, '', url);
  else if (url !== location.pathname + location.search) history.pushState(null, '', url);
  await render();
}

/** Renders the current location into <main>. */
export async function render(): Promise<void> {
  const redirect = await beforeRender(currentPath());
  if (redirect !== null) {
    history.replaceState(null, '', href(redirect));
  }
  const main = document.getElementById('main');
  if (!main) return;
  inflight?.abort();
  const controller = new AbortController();
  inflight = controller;
  const path = currentPath();
  const match = resolver(path);
  const route = match?.route ?? notFound;
  if (!route) return;
  main.replaceChildren();
  main.setAttribute('aria-busy', 'true');
  // Before the page loads, so the navigation marks the new page while it does.
  document.dispatchEvent(new CustomEvent('gp:navigating', { detail: path }));
  const ctx: RouteContext = {
    params: match?.params ?? {},
    query: new URLSearchParams(location.search),
    main,
    signal: controller.signal,
  };
  try {
    const pending = route.render(ctx);
    focusHeading(main);
    await pending;
  } finally {
    if (inflight === controller) main.removeAttribute('aria-busy');
  }
}

/** Moves focus to the page's h1 and names the page in the title and the live region. */
export function focusHeading(main: HTMLElement): void {
  const heading = main.querySelector('h1');
  if (!heading) return;
  heading.setAttribute('tabindex', '-1');
  heading.focus({ preventScroll: false });
  const title = heading.textContent ?? '';
  document.title = `${title} · gpuplane`;
  announce(title);
}

export function start(routes: Route[], fallback: Route,
                      guard: (path: string) => Promise<string | null>): void {
  resolver = compile(routes);
  notFound = fallback;
  beforeRender = guard;
  window.addEventListener('popstate', () => {
    void render();
  });
  document.addEventListener('click', (event) => {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const target = event.target instanceof Element ? event.target.closest('a') : null;
    if (!target || target.target || target.hasAttribute('download')) return;
    const url = new URL(target.href, location.href);
    if (url.origin !== location.origin) return;
    if (url.pathname !== BASE && !url.pathname.startsWith(`${BASE}/`)) return;
    event.preventDefault();
    const path = url.pathname.slice(BASE.length) || '/';
    void navigate(path + url.search);
  });
  void render();
}
