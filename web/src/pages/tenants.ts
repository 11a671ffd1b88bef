// Operators' tenant list (name, isolation class, state) and each tenant's isolation posture.
import { describeError, get, list, seg } from '../api';
import { h, replace } from '../dom';
import { badge, time } from '../format';
import { href, type RouteContext } from '../router';
import { errorBox, loading } from '../status';
import { pagedTable } from '../table';
import type { Posture, Tenant } from '../types';

export async function renderTenants(ctx: RouteContext): Promise<void> {
  ctx.main.append(h('h1', null, 'Tenants'),
    h('p', { class: 'lead' }, 'Every tenant, its isolation class and its state. Create tenants with ',
      h('code', null, 'gpuplane tenant create'), '.'));
  const table = pagedTable<Tenant>({
    caption: 'All tenants',
    empty: 'No tenants yet.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (t) => t.id,
    fetchPage: (after, limit) => list<Tenant>('/v1/tenants', after, limit),
    columns: [
      { header: 'Name', rowHeader: true, cell: (t) => [h('span', { class: 'name' }, t.name),
        t.display_name && t.display_name !== t.name ? h('div', { class: 'small' }, t.display_name) : null] },
      { header: 'Isolation class', cell: (t) => t.isolation_class },
      { header: 'State', cell: (t) => badge(t.state) },
      { header: 'Created', cell: (t) => time(t.created_at) },
      { header: 'ID', cell: (t) => h('span', { class: 'mono' }, t.id) },
      { header: 'Posture', cell: (t) => h('a', { href: href(`/tenants/${encodeURIComponent(t.id)}/posture`),
                                               'aria-label': `Posture of ${t.name}` }, 'Posture') },
    ],
  });
  ctx.main.append(table.element);
  await table.reload();
}

export async function renderPosture(ctx: RouteContext): Promise<void> {
  const id = ctx.params.tenant ?? '';
  const heading = h('h1', null, 'Tenant posture');
  const body = h('div', null, loading('the posture report'));
  ctx.main.append(h('p', { class: 'breadcrumb' }, h('a', { href: href('/tenants') }, 'Tenants'), ' › '), heading, body);
  let posture: Posture;
  try {
    posture = await get<Posture>(`/v1/tenants/${seg(id)}/posture`, undefined, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(body, errorBox(`Could not load the posture of ${id}: ${describeError(err)}`));
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
      h('div', { class: 'table-scroll' }, h('table', null,
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
