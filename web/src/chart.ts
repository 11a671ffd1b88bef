// Time-series charts drawn as SVG with DOM calls (no library; nothing the CSP refuses): stacked
// bars for quantities that add up (GPU-hours, GiB, money), lines for ones that do not (a ratio).
// Colour is never the only cue: each series also has its own fill pattern (bars) or dash and
// marker (lines), named in the legend. The SVG is one image with a spoken summary; "Show as
// table" shows every number in a real table for screen-reader and keyboard users.
import { h, s, scrollBox, uid } from './dom';

/** 'point': samples at arbitrary times (a job's utilization), named to the second. */
export type Granularity = 'point' | 'hour' | 'day' | 'month';

export interface ChartSeries {
  label: string;
  /** One value per period; null where there is none (a gap in a line, nothing in a stack). */
  values: (number | null)[];
}

export interface ChartSpec {
  /** The figure's caption, also the table's. */
  title: string;
  kind: 'stacked' | 'lines';
  /** The periods' start times (ISO 8601), oldest first: one bar or point each. */
  periods: string[];
  granularity: Granularity;
  series: ChartSeries[];
  /** A value as read, with its unit: "12.5 GiB". */
  format: (v: number) => string;
  /** A y-axis label, shorter (no unit): "12.5". Defaults to `format`. */
  tick?: (v: number) => string;
  /** The y axis' unit, written above it: "GiB". */
  unit: string;
  /** A fixed top of the y axis (1 for a ratio); rounded up from the data otherwise. */
  max?: number;
  /** A line under the caption: what the numbers are. */
  note?: string;
}

// Okabe-Ito colours (told apart with the common colour-vision deficiencies), each with the ink
// its pattern marks are drawn in so they show on it.
const COLOURS: { fill: string; ink: string }[] = [
  { fill: '#0072b2', ink: '#ffffff' }, { fill: '#e69f00', ink: '#17202a' },
  { fill: '#009e73', ink: '#ffffff' }, { fill: '#cc79a7', ink: '#17202a' },
  { fill: '#56b4e9', ink: '#17202a' }, { fill: '#d55e00', ink: '#ffffff' },
  { fill: '#f0e442', ink: '#17202a' }, { fill: '#8c8c8c', ink: '#ffffff' },
];
// Pattern marks on an 8x8 tile, one per series beside its colour.
const MARKS = ['', 'M-2 2l4-4M0 8l8-8M6 10l4-4', 'M2 2h.01M6 6h.01', 'M0 0l8 8M8 0l-8 8',
               'M0 4h8', 'M4 0v8', 'M-2 6l4 4M0 0l8 8M6 -2l4 4', 'M0 4h8M4 0v8'];
// Lines: a dash pattern and a marker shape per series.
const DASHES = ['', '7 3', '2 3', '9 3 2 3', '4 4', '12 4', '1 2', '6 2 1 2'];
const MARKERS = ['circle', 'square', 'triangle', 'diamond', 'down', 'circle', 'square', 'triangle'] as const;

function colourOf(i: number): { fill: string; ink: string } {
  return COLOURS[i % COLOURS.length] ?? { fill: '#8c8c8c', ink: '#ffffff' };
}

/** The most series a chart draws; the rest are summed (bars) or left out (lines) by the caller. */
export const MAX_SERIES = COLOURS.length;

const W = 760;
const H = 280;
const M = { top: 22, right: 16, bottom: 46, left: 66 };
const PLOT_W = W - M.left - M.right;
const PLOT_H = H - M.top - M.bottom;

const plain = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
const small = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 2 });

/** A number as people read it: "1,234.57", "0.019", "0.00018", "0". */
export function formatNumber(v: number): string {
  if (v === 0) return '0';
  return Math.abs(v) < 1 ? small.format(v) : plain.format(v);
}

// Days and months are UTC calendar periods (that is how usage is metered and billed), so they
// are named in UTC; an hour is named in the viewer's zone.
const hourLong = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
const hourTick = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const pointLong = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });
const pointTick = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const localDayTick = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });
const dayLong = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' });
const dayTick = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
const monthLong = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'long', timeZone: 'UTC' });
const monthTick = new Intl.DateTimeFormat(undefined, { month: 'short', timeZone: 'UTC' });
const yearTick = new Intl.DateTimeFormat(undefined, { year: 'numeric', timeZone: 'UTC' });

/** A period's name in full: "Nov 29, 2026, 10:00 GMT+1", "Nov 29, 2026 (UTC)", "November 2026". */
export function periodName(iso: string, g: Granularity): string {
  const d = new Date(iso);
  if (g === 'point') return pointLong.format(d);
  if (g === 'hour') return hourLong.format(d);
  if (g === 'day') return `${dayLong.format(d)} (UTC)`;
  return monthLong.format(d);
}

/** A period as a <time>: its name, with the UTC start as the title (as format.time does). */
export function periodTime(iso: string, g: Granularity): HTMLElement {
  const utc = new Date(iso).toISOString();
  return h('time', { datetime: utc, title: utc }, periodName(iso, g));
}

/** An axis label: the short name and, where it changes, the day or year under it. */
function tickLines(iso: string, prev: string | null, g: Granularity): [string, string] {
  const d = new Date(iso);
  const p = prev ? new Date(prev) : null;
  if (g === 'hour' || g === 'point') {
    const day = localDayTick.format(d);
    return [(g === 'hour' ? hourTick : pointTick).format(d), !p || localDayTick.format(p) !== day ? day : ''];
  }
  if (g === 'day') {
    const year = yearTick.format(d);
    return [dayTick.format(d), !p || yearTick.format(p) !== year ? year : ''];
  }
  const year = yearTick.format(d);
  return [monthTick.format(d), !p || yearTick.format(p) !== year ? year : ''];
}

// Label every n-th period, n chosen so that at most about eight labels fit, on round steps.
const TICK_STEPS: Record<Granularity, number[]> = {
  point: [1, 2, 5, 10, 15, 20, 30, 60, 120],
  hour: [1, 2, 3, 4, 6, 12, 24, 48, 72, 168],
  day: [1, 2, 3, 7, 14, 28, 56, 91],
  month: [1, 2, 3, 6, 12],
};

function tickStep(n: number, g: Granularity): number {
  const want = Math.ceil(n / 8);
  return TICK_STEPS[g].find((step) => step >= want) ?? want;
}

/** A round top for the y axis and its step: 0.7 -> (0.8, 0.2), 1234 -> (1500, 500). */
function niceScale(max: number): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 0.25 };
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((f) => f * mag >= raw) ?? 10) * mag;
  return { top: Math.ceil(max / step - 1e-9) * step, step };
}

function patternDef(id: string, i: number): SVGPatternElement {
  const c = colourOf(i);
  const mark = MARKS[i % MARKS.length] ?? '';
  return s('pattern', { id, width: 8, height: 8, patternUnits: 'userSpaceOnUse' },
    s('rect', { width: 8, height: 8, fill: c.fill }),
    mark ? s('path', { d: mark, stroke: c.ink, 'stroke-width': i % MARKS.length === 2 ? 2.6 : 1.3,
                       'stroke-linecap': 'round', fill: 'none' }) : null);
}

function marker(i: number, x: number, y: number, r: number): SVGElement {
  const c = colourOf(i);
  const common = { fill: c.fill, stroke: '#ffffff', 'stroke-width': 1 };
  switch (MARKERS[i % MARKERS.length]) {
    case 'square':
      return s('rect', { x: x - r, y: y - r, width: 2 * r, height: 2 * r, ...common });
    case 'triangle':
      return s('path', { d: `M${x} ${y - r * 1.2}L${x + r * 1.1} ${y + r * 0.8}H${x - r * 1.1}Z`, ...common });
    case 'diamond':
      return s('path', { d: `M${x} ${y - r * 1.3}L${x + r * 1.1} ${y}L${x} ${y + r * 1.3}L${x - r * 1.1} ${y}Z`, ...common });
    case 'down':
      return s('path', { d: `M${x} ${y + r * 1.2}L${x + r * 1.1} ${y - r * 0.8}H${x - r * 1.1}Z`, ...common });
    default:
      return s('circle', { cx: x, cy: y, r, ...common });
  }
}

function legendSwatch(kind: ChartSpec['kind'], i: number): SVGSVGElement {
  if (kind === 'stacked') {
    const id = uid('swatch');
    return s('svg', { width: 22, height: 16, viewBox: '0 0 22 16', 'aria-hidden': 'true', class: 'swatch' },
      s('defs', null, patternDef(id, i)),
      s('rect', { x: 1, y: 1, width: 20, height: 14, rx: 2, fill: `url(#${id})`, stroke: '#17202a', 'stroke-width': 0.75 }));
  }
  const c = colourOf(i);
  return s('svg', { width: 34, height: 16, viewBox: '0 0 34 16', 'aria-hidden': 'true', class: 'swatch' },
    s('line', { x1: 1, y1: 8, x2: 33, y2: 8, stroke: c.fill, 'stroke-width': 2.5,
                'stroke-dasharray': DASHES[i % DASHES.length] || null }),
    marker(i, 17, 8, 4));
}

function total(values: (number | null)[]): number {
  return values.reduce<number>((sum, v) => sum + (v ?? 0), 0);
}

/** One sentence on what the chart shows, for the SVG's accessible name. */
function summary(spec: ChartSpec): string {
  const n = spec.periods.length;
  const first = spec.periods[0];
  const last = spec.periods[n - 1];
  const span = first && last ? ` over ${n} ${spec.granularity}${n === 1 ? '' : 's'}, ${periodName(first, spec.granularity)} to ${periodName(last, spec.granularity)}` : '';
  if (spec.kind === 'stacked') {
    const totals = spec.series.map((x) => ({ label: x.label, sum: total(x.values) })).sort((a, b) => b.sum - a.sum);
    const all = totals.reduce((sum, x) => sum + x.sum, 0);
    return `${spec.title}, stacked bars${span}. Total ${spec.format(all)}: ` +
      `${totals.map((x) => `${x.label} ${spec.format(x.sum)}`).join(', ')}. The table has every value.`;
  }
  const parts = spec.series.map((x) => {
    const values = x.values.filter((v): v is number => v !== null);
    if (values.length === 0) return `${x.label} no data`;
    return `${x.label} from ${spec.format(Math.min(...values))} to ${spec.format(Math.max(...values))}`;
  });
  return `${spec.title}, lines${span}: ${parts.join('; ')}. The table has every value.`;
}

function drawSvg(spec: ChartSpec): SVGSVGElement {
  const n = spec.periods.length;
  const band = PLOT_W / Math.max(1, n);
  const stackTops = spec.periods.map((_, i) =>
    spec.series.reduce((sum, x) => sum + Math.max(0, x.values[i] ?? 0), 0));
  const dataMax = spec.kind === 'stacked'
    ? Math.max(0, ...stackTops)
    : Math.max(0, ...spec.series.flatMap((x) => x.values.filter((v): v is number => v !== null)));
  const { top, step } = spec.max !== undefined ? { top: spec.max, step: spec.max / 4 } : niceScale(dataMax);
  const y = (v: number) => M.top + PLOT_H - (v / top) * PLOT_H;
  const xMid = (i: number) => M.left + band * (i + 0.5);
  const tick = spec.tick ?? spec.format;

  const defs = s('defs');
  const grid: SVGElement[] = [];
  for (let k = 0; k * step <= top * (1 + 1e-9); k += 1) {
    const v = k * step;
    grid.push(s('line', { x1: M.left, x2: M.left + PLOT_W, y1: y(v), y2: y(v), class: v === 0 ? 'axis' : 'grid' }),
              s('text', { x: M.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, tick(v)));
  }
  // Counted back from the newest period, which is always labelled: it is the one looked for.
  const every = tickStep(n, spec.granularity);
  let prev: string | null = null;
  spec.periods.forEach((iso, i) => {
    if ((n - 1 - i) % every !== 0) return;
    const [line1, line2] = tickLines(iso, prev, spec.granularity);
    prev = iso;
    const x = xMid(i);
    grid.push(s('line', { x1: x, x2: x, y1: M.top + PLOT_H, y2: M.top + PLOT_H + 4, class: 'axis' }),
              s('text', { x, y: M.top + PLOT_H + 17, 'text-anchor': 'middle' }, line1));
    if (line2) grid.push(s('text', { x, y: M.top + PLOT_H + 32, 'text-anchor': 'middle', class: 'tick-sub' }, line2));
  });

  const marks: SVGElement[] = [];
  if (spec.kind === 'stacked') {
    const patternIds = spec.series.map((_, i) => {
      const id = uid('pattern');
      defs.append(patternDef(id, i));
      return id;
    });
    const barW = Math.max(1, Math.min(band * 0.72, 48));
    spec.periods.forEach((iso, i) => {
      let base = 0;
      spec.series.forEach((x, k) => {
        const v = x.values[i] ?? 0;
        if (v <= 0) return;
        const y0 = y(base);
        const y1 = y(base + v);
        base += v;
        marks.push(s('rect', {
          x: xMid(i) - barW / 2, y: y1, width: barW, height: Math.max(0.5, y0 - y1),
          fill: `url(#${patternIds[k]})`, stroke: '#17202a', 'stroke-width': barW > 4 ? 0.6 : 0 },
          s('title', null, `${x.label}, ${periodName(iso, spec.granularity)}: ${spec.format(v)}`)));
      });
    });
  } else {
    spec.series.forEach((x, k) => {
      const c = colourOf(k);
      let d = '';
      let pen = false;
      x.values.forEach((v, i) => {
        if (v === null) {
          pen = false;
          return;
        }
        d += `${pen ? 'L' : 'M'}${xMid(i).toFixed(1)} ${y(v).toFixed(1)}`;
        pen = true;
      });
      if (d) marks.push(s('path', { d, fill: 'none', stroke: c.fill, 'stroke-width': 2.5,
                                    'stroke-dasharray': DASHES[k % DASHES.length] || null }));
      x.values.forEach((v, i) => {
        if (v === null) return;
        const dot = marker(k, xMid(i), y(v), n > 60 ? 2.5 : 4);
        dot.append(s('title', null, `${x.label}, ${periodName(spec.periods[i] ?? '', spec.granularity)}: ${spec.format(v)}`));
        marks.push(dot);
      });
    });
  }

  return s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary(spec),
                    preserveAspectRatio: 'xMidYMid meet' },
    defs,
    s('text', { x: M.left - 6, y: 12, 'text-anchor': 'end', class: 'unit' }, spec.unit),
    grid, marks);
}

function dataTable(spec: ChartSpec, id: string): HTMLElement {
  const stacked = spec.kind === 'stacked';
  return scrollBox(
    h('table', null,
      h('caption', { class: 'visually-hidden' }, spec.title),
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, 'Period'),
        spec.series.map((x) => h('th', { scope: 'col', class: 'num' }, x.label)),
        stacked ? h('th', { scope: 'col', class: 'num' }, 'Total') : null)),
      h('tbody', null, spec.periods.map((iso, i) => h('tr', { 'data-period': new Date(iso).toISOString() },
        h('th', { scope: 'row' }, periodTime(iso, spec.granularity)),
        spec.series.map((x) => {
          const v = x.values[i] ?? null;
          return h('td', { class: 'num' }, v === null ? '—' : spec.format(v));
        }),
        stacked ? h('td', { class: 'num' }, spec.format(spec.series.reduce((sum, x) => sum + (x.values[i] ?? 0), 0))) : null)))),
    { class: 'table-scroll chart-table', id, hidden: true });
}

/** A captioned chart with its legend and a "Show as table" button over the same numbers. */
export function chart(spec: ChartSpec): HTMLElement {
  const tableId = uid('chart-table');
  const table = dataTable(spec, tableId);
  const toggle = h('button', { type: 'button', class: 'secondary', 'aria-expanded': 'false', 'aria-controls': tableId },
    'Show as table');
  toggle.addEventListener('click', () => {
    const show = table.hidden;
    table.hidden = !show;
    toggle.setAttribute('aria-expanded', String(show));
    toggle.textContent = show ? 'Hide the table' : 'Show as table';
  });
  const legend = h('ul', { class: 'legend chart-legend', 'aria-label': `Key: ${spec.title}` },
    spec.series.map((x, i) => h('li', null, legendSwatch(spec.kind, i), ' ', x.label,
      spec.kind === 'stacked' ? h('span', { class: 'small' }, ` ${spec.format(total(x.values))}`) : null)));
  return h('figure', { class: 'chart' },
    h('figcaption', null, h('span', { class: 'chart-title' }, spec.title),
      spec.note ? h('span', { class: 'hint' }, spec.note) : null),
    drawSvg(spec), legend, h('p', { class: 'chart-actions' }, toggle), table);
}
