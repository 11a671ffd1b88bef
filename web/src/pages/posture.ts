// A tenant's isolation posture: every control per layer, judged against the tenant's class.
// Operators open it from the tenant list (/tenants/:tenant/posture); a tenant's admins see their
// own at /posture. The report is the same; only the way back differs.
import { describeError, get, seg } from '../api';
import { h, replace, scrollBox } from '../dom';
import { badge, time } from '../format';
import { href, type RouteContext } from '../router';
import { errorBox, loading } from '../status';
import type { Posture } from '../types';

export interface PostureOptions {
  /** Operators came from the tenant list: show the way back to it. */
  fromTenantList: boolean;
}

export async function renderPosture(ctx: RouteContext, tenantId: string | null,
                                    options: PostureOptions): Promise<void> {
  const heading = h('h1', null, 'Tenant posture');
  if (options.fromTenantList)
    ctx.main.append(h('p', { class: 'breadcrumb' }, h('a', { href: href('/tenants') }, 'Tenants'), ' › '));
  ctx.main.append(heading);
  if (!tenantId) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so there is no posture report to show.'));
    return;
  }
  if (!options.fromTenantList)
    ctx.main.append(h('p', { class: 'lead' }, 'How well your isolation holds, layer by layer, judged against your ' +
                                              "tenant's isolation class. A failing control says how to fix it."));
  const body = h('div', null, loading('the posture report'));
  ctx.main.append(body);
  let posture: Posture;
  try {
    posture = await get<Posture>(`/v1/tenants/${seg(tenantId)}/posture`, undefined, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    const what = options.fromTenantList ? `the posture of ${tenantId}` : 'the posture report';
    replace(body, errorBox(`Could not load ${what}: ${describeError(err)}`));
    return;
  }
  heading.textContent = `Posture of ${posture.tenant.name}`;
  document.title = `${heading.textContent} · gpuplane`;
  replace(body,
    h('p', null, `Isolation class ${posture.isolation_class}; checked `, time(posture.checked_at), '.'),
    h('ul', { class: 'stats' },
      h('li', null, h('span', { class: 'stat' }, String(posture.counts.pass)), ' pass'),
      h('li', null, h('span', { class: 'stat' }, String(posture.counts.fail)), ' fail'),
      h('li', null, h('span', { class: 'stat' }, String(posture.counts.not_applicable)), ' not applicable')),
    posture.layers.map((layer) => h('section', { 'aria-label': `Layer ${layer.layer}` },
      h('h2', null, layer.layer),
      scrollBox(h('table', null,
        h('caption', { class: 'visually-hidden' }, `Controls of layer ${layer.layer}`),
        h('thead', null, h('tr', null, ['Control', 'Status', 'Required', 'Summary', 'Remediation']
          .map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, layer.controls.map((c) => h('tr', null,
          h('th', { scope: 'row' }, c.title, h('div', { class: 'mono small' }, c.id)),
          h('td', null, badge(c.status)),
          h('td', null, c.required ? 'yes' : 'no'),
          h('td', null, c.summary),
          h('td', null, c.status === 'fail' ? c.remediation : '—')))))))));
}
