// A tenant's invoices: the list (one per UTC month and revision) and one invoice with its line
// items, SLA credits, tax and prepaid credit, printable. Amounts are integer micro-units of the
// invoice's currency (money.ts); the server rates and rounds, the page only shows.
import { describeError, get, list, listAll, seg, withQuery } from '../api';
import { field, h, replace, scrollBox } from '../dom';
import { badge, plural, time } from '../format';
import { decimal, money, percentOfBps } from '../money';
import { href, type RouteContext } from '../router';
import type { Session } from '../session';
import { errorBox, loading } from '../status';
import { pagedTable } from '../table';
import type { Invoice, InvoiceLine, InvoiceSummary, Project } from '../types';

const STATES = ['', 'draft', 'finalized', 'void'];

/** "2026-11", or "2026-11, revision 2" for a re-issue (the label names the tenant by id). */
function invoiceName(period: string, revision: number): string {
  return revision > 1 ? `${period}, revision ${revision}` : period;
}

/** A draft may still change, a finalized invoice is what is owed, a void one no longer counts. */
function stateBadge(state: string): HTMLElement {
  return badge(state, state === 'finalized' ? 'ok' : state === 'void' ? 'bad' : 'neutral');
}

function invoicesPath(tenantId: string): string {
  return `/v1/tenants/${seg(tenantId)}/invoices`;
}

function noTenant(ctx: RouteContext): void {
  ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so there are no invoices to show.'));
}

export async function renderInvoices(ctx: RouteContext, sess: Session): Promise<void> {
  ctx.main.append(h('h1', null, 'Invoices'));
  const tenant = sess.tenant;
  if (!tenant) return noTenant(ctx);
  ctx.main.append(h('p', { class: 'lead' },
    'One invoice per calendar month (UTC), rated from metered usage with your rate card. A draft is ' +
    're-rated until your provider finalizes it; a voided invoice is replaced by its next revision.'));

  const state = h('select', { name: 'state' },
    STATES.map((s) => h('option', { value: s, selected: (ctx.query.get('state') ?? '') === s }, s || 'any')));
  const period = h('input', { name: 'period', type: 'month', pattern: '[0-9]{4}-[0-9]{2}', placeholder: 'YYYY-MM',
                              value: ctx.query.get('period') ?? '' });
  const filterError = h('div');
  const filters = h('form', { class: 'filters', 'aria-label': 'Filter invoices' },
    field('State', state), field('Month', period, 'A UTC calendar month, YYYY-MM; empty for all.'),
    h('button', { type: 'submit' }, 'Show'), filterError);

  const table = pagedTable<InvoiceSummary>({
    caption: 'Invoices, oldest first',
    empty: 'No invoices match. Invoices appear once your provider rates a month of usage.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (i) => i.id,
    fetchPage: (after, limit) => list<InvoiceSummary>(invoicesPath(tenant.id), after, limit,
                                                      { state: state.value, period: period.value }),
    columns: [
      { header: 'Month', rowHeader: true, cell: (i) =>
          h('a', { href: href(`/invoices/${encodeURIComponent(i.id)}`) }, invoiceName(i.period, i.revision)) },
      { header: 'State', cell: (i) => stateBadge(i.state) },
      { header: 'Total', className: 'num', cell: (i) => money(i.total_micros, i.currency) },
      { header: 'Line items', className: 'num', cell: (i) => String(i.lines) },
      { header: 'Rated', cell: (i) => time(i.computed_at) },
      { header: 'Rate card', cell: (i) => `${i.rate_card.id} v${i.rate_card.version}` },
      { header: 'Reference', cell: (i) => h('span', { class: 'mono small' }, i.label) },
    ],
  });
  filters.addEventListener('submit', (e) => {
    e.preventDefault();
    replace(filterError);
    if (!period.checkValidity()) {
      replace(filterError, errorBox('The month must be written YYYY-MM, for example 2026-11.'));
      period.focus();
      return;
    }
    void table.reload();
  });
  ctx.main.append(filters, table.element);
  await table.reload();
}

// ---- one invoice ----

function lineItemsTable(inv: Invoice, projectName: (id: string) => string): HTMLElement {
  if (inv.lines.length === 0)
    return h('p', { class: 'empty' }, 'No metered usage in this period, so there are no line items.');
  const m = (micros: number) => money(micros, inv.currency);
  return scrollBox(h('table', { class: 'invoice-lines' },
    h('caption', { class: 'visually-hidden' }, 'Line items'),
    h('thead', null, h('tr', null,
      ['Project', 'Resource', 'Class', 'Quantity (unit-hours)', 'Unit price (per hour)', 'Gross', 'Discount', 'Amount']
        .map((c, i) => h('th', { scope: 'col', class: i >= 3 ? 'num' : null }, c)))),
    h('tbody', null, inv.lines.map((l: InvoiceLine) => h('tr', null,
      h('th', { scope: 'row' }, projectName(l.project)),
      h('td', null, l.resource_key, l.offering ? h('div', { class: 'small' }, `offering ${l.offering}`) : null),
      h('td', null, l.class.replace(/_/g, ' '), l.model === 'flat' ? '' : ` (${l.model}, tier ${l.tier + 1})`),
      h('td', { class: 'num' }, decimal(l.quantity_unit_hours)),
      h('td', { class: 'num' }, money(l.unit_price_micros, inv.currency, true)),
      h('td', { class: 'num' }, m(l.gross_micros)),
      h('td', { class: 'num' }, l.discount_bps ? `${percentOfBps(l.discount_bps)}: −${m(l.discount_micros)}` : '—'),
      h('td', { class: 'num' }, m(l.amount_micros)))))));
}

function creditsSection(inv: Invoice): HTMLElement | null {
  if (inv.sla_credits.length === 0) return null;
  const m = (micros: number) => money(micros, inv.currency);
  return h('section', { 'aria-labelledby': 'credits-heading' },
    h('h2', { id: 'credits-heading' }, 'SLA credits'),
    h('p', { class: 'hint' }, 'A share of an offering’s charge, credited where its availability fell below the target.'),
    scrollBox(h('table', null,
      h('caption', { class: 'visually-hidden' }, 'SLA credits'),
      h('thead', null, h('tr', null, ['Offering', 'Reason', 'Credit', 'Charge', 'Amount']
        .map((c, i) => h('th', { scope: 'col', class: i >= 2 ? 'num' : null }, c)))),
      h('tbody', null, inv.sla_credits.map((c) => h('tr', null,
        h('th', { scope: 'row' }, c.offering),
        h('td', null, c.reason),
        h('td', { class: 'num' }, percentOfBps(c.credit_bps)),
        h('td', { class: 'num' }, m(c.charge_micros)),
        h('td', { class: 'num' }, `−${m(c.amount_micros)}`)))))));
}

function totalsTable(inv: Invoice): HTMLElement {
  const m = (micros: number) => money(micros, inv.currency);
  const row = (label: string, value: string, cls?: string) =>
    h('tr', { class: cls }, h('th', { scope: 'row' }, label), h('td', { class: 'num' }, value));
  return h('table', { class: 'invoice-totals', 'data-testid': 'invoice-totals' },
    h('caption', { class: 'visually-hidden' }, 'Totals'),
    h('tbody', null,
      row('Subtotal', m(inv.subtotal_micros)),
      inv.sla_credit_micros ? row('SLA credits', `−${m(inv.sla_credit_micros)}`) : null,
      row('Taxable', m(inv.taxable_micros)),
      row(`Tax (${percentOfBps(inv.tax_bps)})`, m(inv.tax_micros)),
      inv.prepaid_applied_micros ? row('Prepaid credit applied', `−${m(inv.prepaid_applied_micros)}`) : null,
      row(`Total due (${inv.currency})`, m(inv.total_micros), 'grand-total')));
}

export async function renderInvoice(ctx: RouteContext, sess: Session): Promise<void> {
  const id = ctx.params.invoice ?? '';
  const heading = h('h1', { id: 'invoice-heading' }, 'Invoice');
  ctx.main.append(h('p', { class: 'breadcrumb' }, h('a', { href: href('/invoices') }, 'Invoices'), ' › '), heading);
  const tenant = sess.tenant;
  if (!tenant) return noTenant(ctx);
  const body = h('div', null, loading('the invoice'));
  ctx.main.append(body);

  const path = `${invoicesPath(tenant.id)}/${seg(id)}`;
  // Project names for the lines; without them the lines name project ids.
  const projects = listAll<Project>(`/v1/tenants/${seg(tenant.id)}/projects`).catch((): Project[] => []);
  let inv: Invoice;
  try {
    inv = await get<Invoice>(path, undefined, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(body, errorBox(`Could not load invoice ${id}: ${describeError(err)}`));
    return;
  }
  const names = new Map((await projects).map((p) => [p.id, p.name]));
  if (ctx.signal.aborted) return;
  heading.textContent = `Invoice ${invoiceName(inv.period.label, inv.revision)}`;
  document.title = `${heading.textContent} · gpuplane`;

  const facts: [string, Node | string][] = [
    ['Tenant', tenant.name],
    ['Month', h('span', null, inv.period.label, h('span', { class: 'small' }, ' (', time(inv.period.start), ' to ',
                                                  time(inv.period.end), ')'))],
    ['State', stateBadge(inv.state)],
    ['Revision', String(inv.revision)],
    ['Currency', inv.currency],
    ['Rate card', `${inv.rate_card.id}, version ${inv.rate_card.version}`],
    ['Rated', h('span', null, time(inv.computed_at), ` from ${plural(inv.usage_records, 'usage record')}`)],
  ];
  if (inv.finalized_at) facts.push(['Finalized', h('span', null, time(inv.finalized_at))]);
  if (inv.voided_at) facts.push(['Voided', h('span', null, time(inv.voided_at), inv.void_reason ? `: ${inv.void_reason}` : '')]);
  if (inv.supersedes)
    facts.push(['Replaces', h('a', { href: href(`/invoices/${encodeURIComponent(inv.supersedes)}`) },
                              inv.supersedes_label ?? inv.supersedes)]);
  facts.push(['Reference', h('span', { class: 'mono' }, `${inv.label} (${inv.id})`)]);

  const stateNote = inv.state === 'draft'
    ? h('div', { class: 'notice warning', role: 'note' }, h('p', null,
        `A draft: its amounts change as usage is rated, until it is finalized. Rated `, time(inv.computed_at), '.'))
    : inv.state === 'void'
      ? h('div', { class: 'notice error', role: 'note' }, h('p', null, 'Void: this invoice no longer counts.',
          inv.void_reason ? ` Reason: ${inv.void_reason}` : ''))
      : null;

  const printButton = h('button', { type: 'button', onClick: () => window.print() }, 'Print');
  replace(body,
    h('div', { class: 'no-print page-actions' }, printButton,
      h('a', { class: 'button secondary', href: withQuery(path, { format: 'csv' }), download: '' }, 'Download CSV')),
    h('article', { class: 'invoice-doc', 'aria-labelledby': 'invoice-heading' },
      stateNote,
      h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
      h('section', { 'aria-labelledby': 'lines-heading' },
        h('h2', { id: 'lines-heading' }, 'Line items'),
        lineItemsTable(inv, (p) => names.get(p) ?? p)),
      creditsSection(inv),
      h('section', { 'aria-labelledby': 'totals-heading' },
        h('h2', { id: 'totals-heading' }, 'Total'),
        totalsTable(inv),
        inv.prepaid_carried_micros
          ? h('p', { class: 'hint' }, `Prepaid credit carried to the next invoice: ${money(inv.prepaid_carried_micros, inv.currency)}.`)
          : null)));
}
