// SLA standing for a UTC month: per tenant and offering, the availability the tenant got against
// the offering's target, the downtime behind it and the service-credit tier it earned. Operators
// see every tenant, worst first; a tenant's admins and billing users see their own.
import { get, seg } from '../api';
import { formatNumber } from '../chart';
import { field, h, replace } from '../dom';
import { badge, time } from '../format';
import { percentOfBps } from '../money';
import { href, type RouteContext } from '../router';
import { isPlatform, type Session } from '../session';
import { announce, errorBox } from '../status';
import { pagedTable, pagesOf, type Column } from '../table';
import type { SlaStanding, SlaStandingItem } from '../types';

const monthName = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'long', timeZone: 'UTC' });

function currentMonth(): string {
  return new Date().toISOString().slice(0, 7);
}

function creditBadge(bps: number): HTMLElement {
  if (bps === 0) return badge('no credit', 'ok');
  return badge(`${percentOfBps(bps)} credit`, bps >= 10000 ? 'bad' : 'warn');
}

export async function renderSla(ctx: RouteContext, sess: Session): Promise<void> {
  const operator = isPlatform(sess.principal);
  const tenant = sess.tenant;
  ctx.main.append(h('h1', null, 'SLA standing'));
  if (!operator && !tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so there is no SLA standing to show.'));
    return;
  }
  const path = operator ? '/v1/sla' : `/v1/tenants/${seg(tenant?.id ?? '')}/sla`;
  const credits = 'Credits earned below target come off the month’s invoice.';
  ctx.main.append(h('p', { class: 'lead' }, operator
    ? ['Availability per tenant and offering against the offering’s target, worst first. Downtime is time ' +
       'when a node or GPU holding the allocations had failed (see the ', h('a', { href: href('/fleet') }, 'fleet'),
       '). ', credits]
    : ['Availability of your allocations per offering against its target. Downtime is time when a node or GPU ' +
       `holding them had failed. ${credits}`]));

  const wanted = ctx.query.get('period') ?? '';
  const month = h('input', { name: 'period', type: 'month', required: true, pattern: '[0-9]{4}-[0-9]{2}',
                             placeholder: 'YYYY-MM', max: currentMonth(),
                             value: /^\d{4}-\d{2}$/.test(wanted) ? wanted : currentMonth() });
  const form = h('form', { class: 'filters', 'aria-label': 'SLA month' },
    field('Month (UTC)', month),
    h('div', { class: 'filter-actions' }, h('button', { type: 'submit' }, 'Show')));
  const about = h('div', { class: 'sla-about' });
  ctx.main.append(form, about);

  let standing: SlaStanding | null = null;
  const load = async (): Promise<SlaStandingItem[]> => {
    replace(about);
    standing = await get<SlaStanding>(path, { period: month.value }, { signal: ctx.signal });
    replace(about, summary(standing, operator));
    // Worst first: that is what needs attention (and what credits are owed for).
    return [...standing.items].sort((a, b) => a.availability_ppm - b.availability_ppm ||
      a.tenant.localeCompare(b.tenant) || a.offering.localeCompare(b.offering));
  };
  const columns: Column<SlaStandingItem>[] = [
    ...(operator ? [{ header: 'Tenant', rowHeader: true, cell: (x: SlaStandingItem) => x.tenant }] : []),
    { header: 'Offering', rowHeader: !operator, cell: (x) => x.offering },
    { header: 'Availability', cell: (x) => [h('span', { class: 'stat-inline' }, x.availability), ' ',
      x.met_target ? badge('meets target', 'ok') : badge('below target', 'bad')] },
    { header: 'Target', className: 'num', cell: (x) => x.target },
    { header: 'Downtime', className: 'num', cell: (x) => `${formatNumber(x.downtime_gpu_minutes)} GPU-min` },
    { header: 'Entitled', className: 'num', cell: (x) => `${formatNumber(x.entitled_gpu_hours)} GPU-h` },
    { header: 'Credit', cell: (x) => [creditBadge(x.credit_bps), x.reason ? h('span', { class: 'reason' }, x.reason) : null] },
  ];
  const table = pagedTable<SlaStandingItem>({
    caption: operator ? 'Standing by tenant and offering' : 'Standing by offering',
    empty: 'No allocations with an SLA ran in this month. Only allocations made from an offering have one.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (x) => `${x.tenant_id}/${x.offering_id}`,
    fetchPage: pagesOf(load),
    columns,
  });
  ctx.main.append(table.element);

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!month.checkValidity()) {
      replace(about, errorBox('Choose a month as YYYY-MM, this month or earlier.'));
      month.focus();
      return;
    }
    history.replaceState(null, '', href(`/sla?period=${month.value}`));
    void table.reload().then(() => {
      if (standing && !ctx.signal.aborted)
        announce(`SLA standing for ${monthName.format(new Date(`${standing.period}-01T00:00:00Z`))} is shown.`);
    });
  });
  await table.reload();
}

function summary(standing: SlaStanding, operator: boolean): HTMLElement {
  const n = standing.items.length;
  const below = standing.items.filter((x) => !x.met_target).length;
  const credited = standing.items.filter((x) => x.credit_bps > 0).length;
  return h('div', null,
    h('p', null, `${monthName.format(new Date(`${standing.period}-01T00:00:00Z`))} (UTC), figures as of `,
      time(standing.as_of), '.'),
    n === 0 ? null : h('ul', { class: 'stats' },
      h('li', null, h('span', { class: 'stat' }, String(n)),
        operator ? ` tenant and offering ${n === 1 ? 'pair' : 'pairs'}` : ` ${n === 1 ? 'offering' : 'offerings'} in use`),
      h('li', null, h('span', { class: 'stat' }, String(below)), ' below target'),
      h('li', null, h('span', { class: 'stat' }, String(credited)), ' earning a credit')));
}
