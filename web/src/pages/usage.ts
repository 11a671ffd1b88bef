// Usage over time as charts: GPU time held and its utilization, usage posted by external meters,
// and (operators) the amounts invoiced. Operators see every tenant, stacked by tenant; a tenant's
// admins and billing users see their tenant, stacked by project. The same report downloads as CSV.
import { describeError, get, listAll, seg, withQuery, type Query } from '../api';
import { chart, formatNumber, MAX_SERIES, type ChartSeries, type Granularity } from '../chart';
import { field, h, replace } from '../dom';
import { plural } from '../format';
import { money } from '../money';
import { projectNames, tenantNames } from '../names';
import { href, type RouteContext } from '../router';
import { isPlatform, type Session } from '../session';
import { announce, errorBox, loading } from '../status';
import type { InvoiceSummary, UsageReport, UsageRow } from '../types';

interface Range {
  key: string;
  label: string;
  days: number;
  granularity: Granularity;
}

const RANGES: Range[] = [
  { key: '24h', label: 'Last 24 hours', days: 1, granularity: 'hour' },
  { key: '7d', label: 'Last 7 days', days: 7, granularity: 'day' },
  { key: '30d', label: 'Last 30 days', days: 30, granularity: 'day' },
  { key: '12mo', label: 'Last 12 months', days: 365.25, granularity: 'month' },
];
const DEFAULT_RANGE = '7d';
const GRANULARITIES: { key: Granularity; label: string; perDay: number }[] = [
  { key: 'hour', label: 'By hour', perDay: 24 },
  { key: 'day', label: 'By day', perDay: 1 },
  { key: 'month', label: 'By month', perDay: 12 / 365.25 },
];
// More bars than this stop being readable (and the table stops being browsable).
const MAX_PERIODS = 400;

// ---- UTC periods, as the API cuts them --------------------------------------------------------

function periodStart(ms: number, g: Granularity): number {
  const d = new Date(ms);
  if (g === 'hour') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours());
  if (g === 'day') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

function addPeriods(ms: number, g: Granularity, n: number): number {
  if (g === 'hour') return ms + n * 3_600_000;
  if (g === 'day') return ms + n * 86_400_000;
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n, 1);
}

/** How many periods of `g` the range shows: the current one and those before it. */
function periodCount(range: Range, g: Granularity): number {
  return Math.max(1, Math.round(range.days * (GRANULARITIES.find((x) => x.key === g)?.perDay ?? 1)));
}

/** RFC 3339 without milliseconds. */
function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The periods a range shows, from the start of the oldest to now. */
interface Span {
  from: number;
  to: number;
  /** Each period's start, ISO, oldest first. */
  periods: string[];
}

function spanOf(range: Range, g: Granularity, now: number): Span {
  const from = addPeriods(periodStart(now, g), g, -(periodCount(range, g) - 1));
  const periods: string[] = [];
  for (let p = from; p < now; p = addPeriods(p, g, 1)) periods.push(new Date(p).toISOString());
  return { from, to: now, periods };
}

// ---- figures into chart series ----------------------------------------------------------------

/** A figure to chart: its period (ISO start), its group (a tenant or project id) and its numbers. */
interface Point {
  period: string;
  group: string;
  values: number[];
}

/** Who the series are: tenants (operators) or projects (a tenant), by id. */
interface Groups {
  label: (id: string) => string;
  /** "tenant", "project". */
  noun: string;
}

/**
 * Per series, per value, per period: the sums of the points' values. The largest groups (by the
 * sum of value 0) keep a series each; past the chart's colours the rest are summed as "N others".
 */
function sumBySeries(points: Point[], periods: string[], groups: Groups, figures: number):
    { label: string; sums: number[][] }[] {
  const index = new Map(periods.map((p, i) => [p, i]));
  const weight = new Map<string, number>();
  for (const p of points) weight.set(p.group, (weight.get(p.group) ?? 0) + (p.values[0] ?? 0));
  const ranked = [...weight.entries()].sort((a, b) => b[1] - a[1]).map(([g]) => g);
  const own = ranked.length > MAX_SERIES ? ranked.slice(0, MAX_SERIES - 1) : ranked;
  const rest = ranked.length - own.length;
  const slot = new Map(own.map((g, i) => [g, i]));
  const series = [...own.map((g) => groups.label(g)), ...(rest ? [`${rest} other ${groups.noun}s`] : [])]
    .map((label) => ({ label, sums: Array.from({ length: figures }, () => periods.map(() => 0)) }));
  for (const p of points) {
    const i = index.get(new Date(p.period).toISOString());
    const s = series[slot.get(p.group) ?? own.length];
    if (i === undefined || !s) continue;
    p.values.forEach((v, k) => {
      const line = s.sums[k];
      if (line) line[i] = (line[i] ?? 0) + v;
    });
  }
  return series;
}

function stacked(points: Point[], periods: string[], groups: Groups): ChartSeries[] {
  return sumBySeries(points, periods, groups, 1).map((s) => ({ label: s.label, values: s.sums[0] ?? [] }));
}

/** Points of usage rows: the group the report was asked for, and the figures picked. */
function pointsOf(rows: UsageRow[], operator: boolean, figures: (r: UsageRow) => number[]): Point[] {
  return rows.map((r) => ({ period: r.period_start, group: (operator ? r.tenant_id : r.project_id) ?? '',
                            values: figures(r) }));
}

const percent = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 1 });

// ---- the page ---------------------------------------------------------------------------------

export async function renderUsage(ctx: RouteContext, sess: Session): Promise<void> {
  const operator = isPlatform(sess.principal);
  const tenant = sess.tenant;
  ctx.main.append(h('h1', null, 'Usage'));
  if (!operator && !tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so there is no usage to show.'));
    return;
  }
  const path = operator ? '/v1/usage' : `/v1/tenants/${seg(tenant?.id ?? '')}/usage`;
  ctx.main.append(h('p', { class: 'lead' }, operator
    ? 'GPU time every tenant held and how busy it was, usage posted by external meters, and the amounts invoiced.'
    : "Your tenant's usage by project: GPU time held and how busy it was, and usage posted by external meters."));

  const initialRange = RANGES.find((r) => r.key === ctx.query.get('range')) ??
                       RANGES.find((r) => r.key === DEFAULT_RANGE) ?? RANGES[0]!;
  const rangeSelect = h('select', { name: 'range' },
    RANGES.map((r) => h('option', { value: r.key, selected: r === initialRange }, r.label)));
  const granularitySelect = h('select', { name: 'granularity' },
    GRANULARITIES.map((g) => h('option', { value: g.key }, g.label)));
  const range = () => RANGES.find((r) => r.key === rangeSelect.value) ?? initialRange;
  // Each range comes with its natural granularity; those that would draw too many periods for it
  // are offered disabled.
  const fitGranularity = (wanted: string | null) => {
    for (const option of granularitySelect.options)
      option.disabled = periodCount(range(), option.value as Granularity) > MAX_PERIODS;
    const usable = [...granularitySelect.options].find((o) => o.value === wanted && !o.disabled);
    granularitySelect.value = usable ? usable.value : range().granularity;
  };
  fitGranularity(ctx.query.get('granularity'));
  rangeSelect.addEventListener('change', () => fitGranularity(null));

  // A download: the router leaves links with `download` to the browser.
  const csv = h('a', { class: 'button secondary', download: '' }, 'Download CSV');
  const form = h('form', { class: 'filters', 'aria-label': 'Usage range' },
    field('Range', rangeSelect),
    field('Granularity', granularitySelect),
    h('div', { class: 'filter-actions' }, h('button', { type: 'submit' }, 'Show'), csv));
  const results = h('div', { class: 'usage-results' });
  ctx.main.append(form,
    h('p', { class: 'hint' }, 'Days and months are UTC calendar periods, as usage is metered and billed; hours are ' +
      'labelled in your time zone. Hover over a bar or point for its value, or show a chart as a table.'),
    results);

  // A newer Show, or leaving the page, drops what an older one still waits for.
  let inflight: AbortController | null = null;
  ctx.signal.addEventListener('abort', () => inflight?.abort(), { once: true });
  const show = async (announceIt: boolean): Promise<void> => {
    inflight?.abort();
    const mine = new AbortController();
    inflight = mine;
    const r = range();
    const g = granularitySelect.value as Granularity;
    const span = spanOf(r, g, Date.now());
    const query: Query = { from: rfc3339(span.from), to: rfc3339(span.to), granularity: g,
                           group_by: operator ? 'tenant' : 'project' };
    csv.setAttribute('href', withQuery(path, { ...query, format: 'csv' }));
    history.replaceState(null, '', href(`/usage?range=${r.key}&granularity=${g}`));
    replace(results, loading('the usage'));
    let report: UsageReport;
    let names: Map<string, string>;
    try {
      [report, names] = await Promise.all([
        get<UsageReport>(path, query, { signal: mine.signal }),
        operator ? tenantNames() : projectNames([tenant?.id ?? '']),
      ]);
    } catch (err) {
      if (mine.signal.aborted) return;
      replace(results, errorBox(`Could not load the usage: ${describeError(err)}`,
        h('button', { type: 'button', onClick: () => void show(true) }, 'Retry')));
      return;
    }
    if (mine.signal.aborted) return;
    const groups: Groups = operator
      ? { noun: 'tenant', label: (id) => names.get(id) ?? (id || 'Unknown tenant') }
      : { noun: 'project', label: (id) => (id ? names.get(id) ?? id : 'No project') };
    const axis: Axis = { periods: span.periods, granularity: g };
    replace(results, gpuSection(report.rows, operator, groups, axis), eventSection(report.rows, operator, groups, axis));
    if (operator) {
      const invoiced = h('section', { 'aria-labelledby': 'invoiced-heading' },
        h('h2', { id: 'invoiced-heading' }, 'Invoiced'), loading('the invoices'));
      results.append(invoiced);
      await invoicedSection(invoiced, span, groups, mine.signal);
    }
    if (announceIt && !mine.signal.aborted)
      announce(`Usage for the ${r.label.toLowerCase()}, by ${g}, is shown.`);
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    void show(true);
  });
  await show(false);
}

interface Axis {
  periods: string[];
  granularity: Granularity;
}

const gpuHours = (v: number) => `${formatNumber(v)} GPU-h`;

function gpuSection(rows: UsageRow[], operator: boolean, groups: Groups, axis: Axis): HTMLElement {
  const alloc = rows.filter((r) => r.kind === 'allocation');
  const section = h('section', { 'aria-labelledby': 'gpu-heading' }, h('h2', { id: 'gpu-heading' }, 'GPU time'));
  if (alloc.length === 0) {
    section.append(h('p', { class: 'empty' }, 'No GPU time in this range: nothing was placed.'));
    return section;
  }
  section.append(chart({
    ...axis,
    title: `GPU-hours held, by ${groups.noun}`,
    note: 'GPU-equivalent hours of placed and active allocations: a MIG instance or a share counts its fraction of a GPU.',
    kind: 'stacked', unit: 'GPU-h', format: gpuHours, tick: formatNumber,
    series: stacked(pointsOf(alloc, operator, (r) => [r.allocated_gpu_hours ?? 0]), axis.periods, groups),
  }));
  if (!alloc.some((r) => (r.sampled_gpu_hours ?? 0) > 0)) {
    section.append(h('p', { class: 'hint' },
      'No utilization samples in this range: node agents report GPU utilization with their heartbeats.'));
    return section;
  }
  // Utilization is a ratio: summed as utilized and sampled hours, divided per period.
  const sums = sumBySeries(pointsOf(alloc, operator, (r) => [r.allocated_gpu_hours ?? 0, r.utilized_gpu_hours ?? 0,
                                                             r.sampled_gpu_hours ?? 0]), axis.periods, groups, 3);
  section.append(chart({
    ...axis,
    title: `Utilization, by ${groups.noun}`,
    note: "Utilized over sampled GPU-hours: how busy the held GPUs were, from the agents' samples. Gaps had no samples.",
    kind: 'lines', unit: 'busy', max: 1, format: (v) => percent.format(v),
    series: sums.map((s) => ({
      label: s.label,
      values: axis.periods.map((_, i) => {
        const sampled = s.sums[2]?.[i] ?? 0;
        return sampled > 0 ? (s.sums[1]?.[i] ?? 0) / sampled : null;
      }),
    })),
  }));
  return section;
}

function eventSection(rows: UsageRow[], operator: boolean, groups: Groups, axis: Axis): HTMLElement {
  const events = rows.filter((r) => r.kind === 'event');
  const section = h('section', { 'aria-labelledby': 'events-heading' }, h('h2', { id: 'events-heading' }, 'Metered usage'));
  if (events.length === 0) {
    section.append(h('p', { class: 'empty' }, 'No usage events in this range. External meters post them to ',
      h('code', null, '/v1/usage-events'), '.'));
    return section;
  }
  // Quantities of different units never add up: one chart per unit.
  for (const unit of [...new Set(events.map((r) => r.unit ?? ''))].sort()) {
    const ofUnit = events.filter((r) => (r.unit ?? '') === unit);
    section.append(chart({
      ...axis,
      title: `Usage events in ${unit || 'units'}, by ${groups.noun}`,
      note: `${plural(ofUnit.reduce((n, r) => n + (r.events ?? 0), 0), 'event')} from external meters (egress, storage, …).`,
      kind: 'stacked', unit, format: (v) => `${formatNumber(v)} ${unit}`, tick: formatNumber,
      series: stacked(pointsOf(ofUnit, operator, (r) => [Number(r.quantity ?? 0)]), axis.periods, groups),
    }));
  }
  return section;
}

/** Invoice totals per UTC month of the span, by tenant, one chart per currency (operators). */
async function invoicedSection(section: HTMLElement, span: Span, groups: Groups, signal: AbortSignal): Promise<void> {
  const months: string[] = [];
  for (let m = periodStart(span.from, 'month'); m < span.to; m = addPeriods(m, 'month', 1))
    months.push(new Date(m).toISOString());
  const heading = h('h2', { id: 'invoiced-heading' }, 'Invoiced');
  let invoices: InvoiceSummary[];
  try {
    const perMonth = await Promise.all(months.map((m) =>
      listAll<InvoiceSummary>('/v1/invoices', 10000, { period: m.slice(0, 7) })));
    // A void invoice was replaced by its next revision, or bills nothing: it does not count.
    invoices = perMonth.flat().filter((i) => i.state !== 'void');
  } catch (err) {
    if (!signal.aborted) replace(section, heading, errorBox(`Could not load the invoices: ${describeError(err)}`));
    return;
  }
  if (signal.aborted) return;
  if (invoices.length === 0) {
    replace(section, heading, h('p', { class: 'empty' }, 'No invoices for these months. Operators draft them with ',
      h('code', null, 'gpuplane invoice run --period YYYY-MM'), '.'));
    return;
  }
  const drafts = invoices.filter((i) => i.state === 'draft').length;
  const charts = [...new Set(invoices.map((i) => i.currency))].sort().map((currency) => chart({
    title: `Invoiced in ${currency}, by tenant`,
    note: 'Invoice totals per UTC month, after SLA credits, tax and prepaid credit' +
          (drafts ? `; ${plural(drafts, 'draft')} among them, whose totals change until finalized.` : '.'),
    kind: 'stacked', periods: months, granularity: 'month', unit: currency, tick: formatNumber,
    // Charted in currency units, written as the invoices page writes amounts.
    format: (v) => money(Math.round(v * 1e6), currency),
    series: stacked(invoices.filter((i) => i.currency === currency).map((i) => ({
      period: `${i.period}-01T00:00:00Z`, group: i.tenant, values: [i.total_micros / 1e6] })), months, groups),
  }));
  replace(section, heading, charts);
}
