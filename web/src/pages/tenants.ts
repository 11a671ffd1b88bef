// Operators' tenant list: name, isolation class, state, and links to each tenant's posture
// (pages/posture.ts) and jobs (pages/jobs.ts).
import { list } from '../api';
import { h } from '../dom';
import { badge, time } from '../format';
import { href, type RouteContext } from '../router';
import { pagedTable } from '../table';
import { jobsPath } from './jobs';
import type { Tenant } from '../types';

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
      { header: 'Jobs', cell: (t) => h('a', { href: href(jobsPath(t.id)), 'aria-label': `Jobs of ${t.name}` }, 'Jobs') },
    ],
  });
  ctx.main.append(table.element);
  await table.reload();
}
