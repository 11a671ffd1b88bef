// GPUs drawn as SVG bars: a MIG GPU divided into its instances on its 8 memory slices, a
// time-sliced GPU into its shares, each coloured by the tenant that holds it. Every shape has a
// <title>, and the whole drawing an aria-label that says the same in words.
import { h, s } from './dom';
import type { Allocation, Gpu, MigInstance } from './types';

// MIG geometry of A100/H100/H200 (NVIDIA's MIG user guide; src/fleet/mig_catalog.cpp): 7 compute
// and 8 memory slices; the profile names' memory for 1, 2, 4 and 8 memory slices.
const MEMORY_SLICES = 8;
const CATALOG_GB: { match: RegExp; gb: [number, number, number, number] }[] = [
  { match: /a100.*80/, gb: [10, 20, 40, 80] },
  { match: /a100/, gb: [5, 10, 20, 40] },
  { match: /h100/, gb: [10, 20, 40, 80] },
  { match: /h200/, gb: [18, 35, 71, 141] },
];

/** Memory slices an instance of `profile` ("3g.40gb") covers on a GPU of `model`. */
export function memorySlices(model: string, profile: string): number {
  const m = /^(\d+)g\.(\d+)gb/.exec(profile);
  if (!m) return 1;
  const compute = Number(m[1]);
  const gb = Number(m[2]);
  if (compute >= 7) return 8;
  if (compute >= 3) return 4;
  if (compute === 2) return 2;
  const key = model.toLowerCase().replace(/[^a-z0-9]/g, '');
  const cat = CATALOG_GB.find((c) => c.match.test(key));
  if (cat) {
    const i = cat.gb.indexOf(gb);
    if (i >= 0) return [1, 2, 4, 8][i] ?? 1;
  }
  return 1;
}

export interface Holder {
  tenantId: string;
  tenantName: string;
  allocationId: string;
  allocationName: string;
}

export interface GpuHolders {
  whole: Holder | null;
  mig: Map<number, Holder>; // by instance start slice
  /** The profiles of held instances, by start slice (a planned layout may not be applied yet). */
  migProfiles: Map<number, string>;
  shares: { holder: Holder; milli: number }[];
}

/** Which tenant holds what, from live allocations' placements. */
export class HolderIndex {
  private readonly byGpu = new Map<string, GpuHolders>();

  add(alloc: Allocation, tenantName: string): void {
    if (!alloc.placement) return;
    const holder: Holder = {
      tenantId: alloc.tenant_id,
      tenantName,
      allocationId: alloc.id,
      allocationName: alloc.name,
    };
    for (const g of alloc.placement.gpus) {
      let entry = this.byGpu.get(g.gpu);
      if (!entry) {
        entry = { whole: null, mig: new Map(), migProfiles: new Map(), shares: [] };
        this.byGpu.set(g.gpu, entry);
      }
      if (g.mig) {
        entry.mig.set(g.mig.start, holder);
        entry.migProfiles.set(g.mig.start, g.mig.profile);
      }
      else if (g.milli) entry.shares.push({ holder, milli: g.milli });
      else entry.whole = holder;
    }
  }

  of(uuid: string): GpuHolders | undefined {
    return this.byGpu.get(uuid);
  }

  tenants(): { id: string; name: string }[] {
    const seen = new Map<string, string>();
    for (const e of this.byGpu.values()) {
      if (e.whole) seen.set(e.whole.tenantId, e.whole.tenantName);
      for (const holder of e.mig.values()) seen.set(holder.tenantId, holder.tenantName);
      for (const sh of e.shares) seen.set(sh.holder.tenantId, sh.holder.tenantName);
    }
    return [...seen].map(([id, name]) => ({ id, name })).sort((a, b) => a.name.localeCompare(b.name));
  }
}

// Light colours (ColorBrewer Set3) so dark labels stay readable on every one.
const PALETTE = ['#8dd3c7', '#fdb462', '#bebada', '#fb8072', '#80b1d3', '#b3de69', '#fccde5',
                 '#ffffb3', '#bc80bd', '#ccebc5', '#d9d9d9', '#ffed6f'];
const FREE = '#ffffff';
const EMPTY = '#eef1f4';

/** A colour per tenant, stable for the page (in the order tenants are first seen). */
export class TenantColours {
  private readonly map = new Map<string, string>();

  of(tenantId: string): string {
    let c = this.map.get(tenantId);
    if (!c) {
      c = PALETTE[this.map.size % PALETTE.length] ?? '#cccccc';
      this.map.set(tenantId, c);
    }
    return c;
  }
}

function holderText(holder: Holder | null | undefined): string {
  return holder ? `held by ${holder.tenantName} (${holder.allocationName})` : 'free';
}

function outline(gpu: Gpu): { stroke: string; width: number; dash: string | null } {
  if (gpu.health === 'healthy') return { stroke: '#4a5561', width: 1, dash: null };
  if (gpu.health === 'missing') return { stroke: '#8a939c', width: 1.5, dash: '3 2' };
  return { stroke: '#c0392b', width: 2.5, dash: '5 2' };
}

/**
 * The GPU's MIG instances: those it reports, plus held ones it does not report yet (a layout the
 * scheduler planned and the node's agent has not applied).
 */
export function migInstances(gpu: Gpu, holders: GpuHolders | undefined): MigInstance[] {
  const out = [...gpu.mig_instances];
  for (const [start, profile] of holders?.migProfiles ?? [])
    if (!out.some((m) => m.start === start)) out.push({ profile, start });
  return out.sort((a, b) => a.start - b.start);
}

/** One GPU as an SVG bar of `width` x `height`. */
export function gpuSvg(gpu: Gpu, holders: GpuHolders | undefined, colours: TenantColours,
                       width = 160, height = 30): SVGSVGElement {
  const words: string[] = [`GPU ${gpu.index} ${gpu.model}, ${gpu.health}`];
  const shapes: SVGElement[] = [];
  const inner = { x: 1.5, y: 1.5, w: width - 3, h: height - 3 };
  const label = (x: number, w: number, text: string): SVGElement | null =>
    w < 16 ? null
      : s('text', { x: x + w / 2, y: inner.y + inner.h / 2 + 4, 'text-anchor': 'middle',
                    'font-size': 10, fill: '#111' }, w >= 54 ? text : text.split('.')[0] ?? text);

  const instances = migInstances(gpu, holders);
  if (gpu.mode === 'mig' || instances.length > 0) {
    const sw = inner.w / MEMORY_SLICES;
    for (let i = 0; i < MEMORY_SLICES; i += 1)
      shapes.push(s('rect', { x: inner.x + i * sw, y: inner.y, width: sw, height: inner.h,
                              fill: EMPTY, stroke: '#ffffff' }));
    const parts: string[] = [];
    for (const inst of instances) {
      const slices = memorySlices(gpu.model, inst.profile);
      const holder = holders?.mig.get(inst.start);
      const x = inner.x + inst.start * sw;
      const w = slices * sw;
      const text = `${inst.profile} at slice ${inst.start}, ${holderText(holder)}`;
      parts.push(text);
      shapes.push(s('g', { class: 'mig-instance' },
        s('title', null, text),
        s('rect', { x: x + 1, y: inner.y + 1, width: Math.max(1, w - 2), height: inner.h - 2, rx: 2,
                    fill: holder ? colours.of(holder.tenantId) : FREE, stroke: '#333' }),
        label(x, w, inst.profile)));
    }
    words.push(instances.length ? `MIG: ${parts.join('; ')}` : 'MIG, no instances');
  } else if (gpu.mode === 'time-sliced') {
    let x = inner.x;
    const shares = holders?.shares ?? [];
    for (const sh of shares) {
      const w = (inner.w * Math.min(1000, sh.milli)) / 1000;
      const text = `${sh.milli} milli-GPU ${holderText(sh.holder)}`;
      shapes.push(s('g', null, s('title', null, text),
        s('rect', { x, y: inner.y, width: w, height: inner.h, fill: colours.of(sh.holder.tenantId),
                    stroke: '#333' })));
      x += w;
    }
    const used = shares.reduce((n, sh) => n + sh.milli, 0);
    if (used < 1000)
      shapes.push(s('g', null, s('title', null, `${1000 - used} milli-GPU free`),
        s('rect', { x, y: inner.y, width: inner.x + inner.w - x, height: inner.h, fill: FREE })));
    words.push(`time-sliced, ${shares.length ? shares.map((sh) => `${sh.milli} milli-GPU ${holderText(sh.holder)}`).join('; ') : 'no shares held'}`);
    shapes.push(s('text', { x: inner.x + inner.w - 4, y: inner.y + inner.h / 2 + 4,
                            'text-anchor': 'end', 'font-size': 10, fill: '#111' }, 'TS'));
  } else {
    const holder = holders?.whole;
    const text = `whole GPU, ${holderText(holder)}`;
    words.push(text);
    shapes.push(s('g', null, s('title', null, text),
      s('rect', { x: inner.x, y: inner.y, width: inner.w, height: inner.h,
                  fill: holder ? colours.of(holder.tenantId) : FREE })));
    const l = label(inner.x, inner.w, holder ? holder.tenantName : 'whole');
    if (l) shapes.push(l);
  }
  if (gpu.health !== 'healthy' && gpu.health_reason) words.push(gpu.health_reason);
  const o = outline(gpu);
  shapes.push(s('rect', { x: 0.75, y: 0.75, width: width - 1.5, height: height - 1.5, rx: 3,
                          fill: 'none', stroke: o.stroke, 'stroke-width': o.width,
                          'stroke-dasharray': o.dash }));
  const summary = words.join('. ');
  return s('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
                    'aria-label': summary, class: 'gpu-bar', 'data-gpu': gpu.uuid },
           s('title', null, summary), shapes);
}

/** The colour key: which colour is which tenant, and what free and unhealthy look like. */
export function legend(holders: HolderIndex, colours: TenantColours): HTMLElement {
  const swatch = (fill: string, extra: Record<string, string> = {}) =>
    s('svg', { width: 16, height: 16, viewBox: '0 0 16 16', 'aria-hidden': 'true' },
      s('rect', { x: 1, y: 1, width: 14, height: 14, rx: 2, fill, stroke: '#333', ...extra }));
  const tenants = holders.tenants();
  return h('ul', { class: 'legend', 'aria-label': 'Colour key' },
    tenants.map((t) => h('li', { 'data-tenant': t.name }, swatch(colours.of(t.id)), ` ${t.name}`)),
    h('li', null, swatch(FREE), ' free'),
    h('li', null, swatch(FREE, { stroke: '#c0392b', 'stroke-dasharray': '4 2', 'stroke-width': '2' }),
      ' unhealthy GPU'));
}
