// The console's entry point: finds out who is logged in, draws the frame and routes /console/...
import './styles.css';
import { setUnauthenticatedHandler } from './api';
import { h } from './dom';
import { renderAllocations } from './pages/allocations';
import { renderApiKeys } from './pages/apikeys';
import { renderAudit } from './pages/audit';
import { renderBudgets } from './pages/budgets';
import { renderFleet, renderNode } from './pages/fleet';
import { renderInvoice, renderInvoices } from './pages/invoices';
import { renderJob, renderJobs } from './pages/jobs';
import { renderLogin, safeNext } from './pages/login';
import { renderMembers } from './pages/members';
import { renderPosture } from './pages/posture';
import { renderProjects } from './pages/projects';
import { renderQueue } from './pages/queue';
import { renderSla } from './pages/sla';
import { renderTenants } from './pages/tenants';
import { renderUsage } from './pages/usage';
import { renderVms } from './pages/vms';
import { currentPath, href, navigate, start, type Route, type RouteContext } from './router';
import { clearSession, loadSession, session, type Session } from './session';
import { homePath, renderShell } from './shell';
import { errorBox } from './status';

/** A page for logged-in principals only. */
function authed(render: (ctx: RouteContext, sess: Session) => Promise<void> | void) {
  return (ctx: RouteContext) => {
    const sess = session();
    if (!sess) return undefined; // the guard has sent the browser to the login page
    return render(ctx, sess);
  };
}

const routes: Route[] = [
  { pattern: '/login', render: (ctx) => renderLogin(ctx, {
    loggedIn: async (next) => {
      await loadSession();
      renderShell(session());
      await navigate(next, { replace: true });
    },
  }) },
  { pattern: '/fleet', render: authed((ctx) => renderFleet(ctx)) },
  { pattern: '/fleet/nodes/:node', render: authed((ctx) => renderNode(ctx)) },
  { pattern: '/tenants', render: authed((ctx) => renderTenants(ctx)) },
  { pattern: '/tenants/:tenant/posture',
    render: authed((ctx) => renderPosture(ctx, ctx.params.tenant ?? '', { fromTenantList: true })) },
  { pattern: '/audit', render: authed((ctx) => renderAudit(ctx)) },
  { pattern: '/projects', render: authed(renderProjects) },
  { pattern: '/api-keys', render: authed(renderApiKeys) },
  { pattern: '/allocations', render: authed(renderAllocations) },
  { pattern: '/vms', render: authed(renderVms) },
  // A tenant's jobs (operators: ?tenant=), and one job.
  { pattern: '/jobs', render: authed(renderJobs) },
  { pattern: '/jobs/:tenant/:project/:job', render: authed(renderJob) },
  // A tenant's account pages (pages/members, invoices, budgets, posture).
  { pattern: '/members', render: authed(renderMembers) },
  { pattern: '/invoices', render: authed(renderInvoices) },
  { pattern: '/invoices/:invoice', render: authed(renderInvoice) },
  { pattern: '/budgets', render: authed(renderBudgets) },
  { pattern: '/posture', render: authed((ctx, sess) => renderPosture(ctx, sess.tenant?.id ?? null, { fromTenantList: false })) },
  { pattern: '/queue', render: authed(renderQueue) },
  { pattern: '/usage', render: authed(renderUsage) },
  { pattern: '/sla', render: authed(renderSla) },
];

const notFound: Route = {
  pattern: '',
  render: (ctx) => {
    ctx.main.append(h('h1', null, 'Page not found'),
      h('p', null, 'There is no console page at this address. ', h('a', { href: href('/') }, 'Go to the start page'), '.'));
  },
};

let checked = false;

/** Before each page: know the session; send strangers to the login page and "/" home. */
async function guard(path: string): Promise<string | null> {
  if (!checked) {
    checked = true;
    try {
      await loadSession();
    } catch (err) {
      const main = document.getElementById('main');
      main?.replaceChildren(h('h1', null, 'gpuplane'),
        errorBox(`The control plane did not answer: ${err instanceof Error ? err.message : String(err)}`));
    }
    renderShell(session());
  }
  const sess = session();
  if (path === '/login' || path.startsWith('/login?')) {
    return sess ? homePath(sess) : null;
  }
  if (!sess) {
    const back = path === '/' ? '' : `?next=${encodeURIComponent(path + location.search)}`;
    return `/login${back}`;
  }
  if (path === '/') return homePath(sess);
  return null;
}

setUnauthenticatedHandler(() => {
  // The session ended (expired, logged out elsewhere, user disabled): sign in again.
  if (!session()) return;
  clearSession();
  renderShell(null);
  const path = currentPath();
  void navigate(`/login?expired=1&next=${encodeURIComponent(safeNext(path))}`, { replace: true });
});

document.addEventListener('gp:navigating', () => renderShell(session()));
start(routes, notFound, guard);
