// The frame around every page once logged in: who is logged in, the navigation their roles call
// for, and logging out.
import { ApiError, describeError, post } from './api';
import { h, replace } from './dom';
import { currentPath, href, navigate } from './router';
import { canReadAudit, clearSession, hasRole, isPlatform, isTenantAdmin, roles, type Session } from './session';
import { announce } from './status';

export interface NavItem {
  path: string;
  label: string;
}

export function navItems(sess: Session): NavItem[] {
  const items: NavItem[] = [];
  const p = sess.principal;
  if (isPlatform(p)) {
    items.push({ path: '/fleet', label: 'Fleet' }, { path: '/tenants', label: 'Tenants' });
    // Any tenant's jobs, the tenant picked on the page (a principal with a tenant gets it below).
    if (!sess.tenant) items.push({ path: '/jobs', label: 'Jobs' });
    if (canReadAudit(p)) items.push({ path: '/audit', label: 'Audit trail' });
    items.push(...insightItems(true, true));
  }
  if (sess.tenant) {
    items.push({ path: '/projects', label: 'Projects' },
               { path: '/allocations', label: 'Allocations' },
               { path: '/jobs', label: 'Jobs' },
               { path: '/vms', label: 'VMs' });
    // The queue needs allocation.read tenant-wide; usage and SLA need usage.read (docs/api.md).
    if (!isPlatform(p)) items.push(...insightItems(isTenantAdmin(p), hasRole(p, 'tenant-admin', 'tenant-billing')));
    // Members and posture need identity.read tenant-wide; invoices and budgets billing.read.
    items.push(...accountItems(isTenantAdmin(p), hasRole(p, 'tenant-admin', 'tenant-billing')));
  }
  items.push({ path: '/api-keys', label: 'API keys' });
  return items;
}

/** The queue, usage and SLA pages (pages/queue.ts, usage.ts, sla.ts), for whom they answer. */
function insightItems(queue: boolean, usage: boolean): NavItem[] {
  return [...(queue ? [{ path: '/queue', label: 'Queue' }] : []),
          ...(usage ? [{ path: '/usage', label: 'Usage' }, { path: '/sla', label: 'SLA' }] : [])];
}

/** A tenant's account pages (pages/members.ts, invoices.ts, budgets.ts, posture.ts). */
function accountItems(identity: boolean, billing: boolean): NavItem[] {
  return [...(identity ? [{ path: '/members', label: 'Members' }] : []),
          ...(billing ? [{ path: '/invoices', label: 'Invoices' }, { path: '/budgets', label: 'Budgets' }] : []),
          ...(identity ? [{ path: '/posture', label: 'Posture' }] : [])];
}

/** The first page for this principal. */
export function homePath(sess: Session): string {
  return navItems(sess)[0]?.path ?? '/api-keys';
}

export function renderShell(sess: Session | null): void {
  const banner = document.getElementById('banner');
  if (!banner) return;
  if (!sess) {
    replace(banner, h('div', { class: 'brand' }, h('span', { class: 'logo', 'aria-hidden': 'true' }, '▦'), ' gpuplane'));
    return;
  }
  const p = sess.principal;
  const path = currentPath();
  const nav = h('nav', { class: 'main-nav', 'aria-label': 'Main' },
    h('ul', null, navItems(sess).map((item) => {
      const current = path === item.path || path.startsWith(`${item.path}/`);
      return h('li', null, h('a', { href: href(item.path), 'aria-current': current ? 'page' : null }, item.label));
    })));
  const who = h('p', { class: 'who' },
    h('span', { class: 'visually-hidden' }, 'Signed in as '),
    h('strong', { 'data-testid': 'who-name' }, p.name),
    sess.tenant ? [' · tenant ', h('strong', { 'data-testid': 'who-tenant' }, sess.tenant.name)]
                : ' · platform',
    h('span', { class: 'roles' }, ` (${roles(p).join(', ') || 'no roles'})`));
  const logout = h('button', { type: 'button', class: 'secondary', onClick: () => void logOut(logout) }, 'Log out');
  replace(banner,
    h('div', { class: 'brand' }, h('a', { href: href('/') }, h('span', { class: 'logo', 'aria-hidden': 'true' }, '▦'), ' gpuplane')),
    nav,
    h('div', { class: 'session' }, who, logout));
}

async function logOut(button: HTMLButtonElement): Promise<void> {
  button.disabled = true;
  try {
    await post('/v1/auth/logout');
  } catch (err) {
    // A session that is already gone is logged out all the same.
    if (!(err instanceof ApiError && err.status === 401)) {
      button.disabled = false;
      announce(`Log out failed: ${describeError(err)}`);
      return;
    }
  }
  clearSession();
  await navigate('/login?logged_out=1');
  announce('You are logged out.');
}
