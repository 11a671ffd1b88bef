// The scheduler's queue: what waits for GPUs, in the order the scheduler considers it, and why
// each entry waits, in words (over quota, or no room in the fleet) beside the scheduler's own
// reason. Operators see every tenant's entries; a tenant's admins see their own, with their
// place among the tenant's own (the server counts nothing of other tenants' for them).
import { get, listAll, seg } from '../api';
import { h, replace, type Child } from '../dom';
import { formatNumber } from '../chart';
import { badge, plural, time } from '../format';
import { projectNames, tenantNames } from '../names';
import { href, type RouteContext } from '../router';
import { isPlatform, type Session } from '../session';
import { announce } from '../status';
import { pagedTable, pagesOf } from '../table';
import type { Allocation, Queue, QueueEntry } from '../types';
import { shapeText } from './allocations';

// The scheduler counts in 1/7000 GPU; fair-share usage is in unit-seconds (docs/scheduling.md).
const UNIT_SECONDS_PER_GPU_HOUR = 7000 * 3600;

/** How long something has waited: "under a minute", "5 min", "2 h 5 min", "3 d 4 h". */
function waited(ms: number): string {
  const min = Math.floor(ms / 60_000);
  if (min < 1) return 'under a minute';
  if (min < 60) return `${min} min`;
  const hours = Math.floor(min / 60);
  if (hours < 24) return min % 60 ? `${hours} h ${min % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

interface Explanation {
  /** What holds it back, in a few words. */
  title: string;
  /** When it will start, and who can change that. */
  advice: string;
  /** Over quota waits whatever the fleet has free; no capacity waits for GPUs. */
  kind: 'quota' | 'capacity' | 'other';
}

// The levels the quota tree names in its reasons ("quota exceeded at project level: ...").
const QUOTA_ADVICE: Record<string, string> = {
  project: "It would take its project past the project's share of the tenant's quota. It starts when the " +
           "project's other allocations end, or when a tenant admin raises the project's quota.",
  tenant: "It would take the tenant past its quota. It starts when the tenant's other allocations end, " +
          "or when an operator raises the tenant's quota.",
  cohort: "The tenant has borrowed all that its cohort lends. It starts when borrowed quota is freed.",
  platform: 'The platform limit for this GPU model is reached. It starts when allocations under the limit end.',
};

/** The scheduler's reason code and text as an operator or tenant reads them. */
function explain(entry: Pick<QueueEntry, 'reason_code' | 'reason'>): Explanation {
  if (entry.reason_code === 'quota_exceeded') {
    const level = /quota exceeded at (\w+) level/.exec(entry.reason)?.[1] ?? '';
    return {
      kind: 'quota',
      title: level ? `Over ${level} quota` : 'Over quota',
      advice: `It waits even when GPUs are free. ${QUOTA_ADVICE[level] ?? 'It starts when quota frees.'}`,
    };
  }
  if (entry.reason_code === 'insufficient_capacity') {
    return {
      kind: 'capacity',
      title: 'No free GPUs that fit',
      advice: 'Quota allows it, but no free GPUs fit its shape now. It starts when allocations end or GPUs are added.',
    };
  }
  return { kind: 'other', title: entry.reason_code ? entry.reason_code.replace(/_/g, ' ') : 'Waiting', advice: '' };
}

interface Names {
  tenants: Map<string, string>;
  projects: Map<string, string>;
  allocations: Map<string, string>;
}

export async function renderQueue(ctx: RouteContext, sess: Session): Promise<void> {
  const operator = isPlatform(sess.principal);
  const tenant = sess.tenant;
  ctx.main.append(h('h1', null, 'Queue'));
  if (!operator && !tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so nothing of yours can wait here.'));
    return;
  }
  const path = operator ? '/v1/queue' : `/v1/tenants/${seg(tenant?.id ?? '')}/queue`;
  ctx.main.append(h('p', { class: 'lead' }, operator
    ? 'Every allocation waiting for GPUs, in the order the scheduler considers them: priority first, then ' +
      'fair share between tenants (less recent use goes first), then submission time.'
    : "Your tenant's allocations that wait for GPUs, in the order the scheduler considers them, with " +
      "their place among your tenant's own (other tenants' entries are neither shown nor counted)."));

  const stats = h('div', { class: 'queue-stats' });
  let names: Names = { tenants: new Map(), projects: new Map(), allocations: new Map() };
  // The queue's length as the server counts it for the caller (a tenant: its own entries) and the
  // entries shown.
  let length = 0;
  let shown = 0;
  const load = async (): Promise<QueueEntry[]> => {
    const queue = await get<Queue>(path, undefined, { signal: ctx.signal });
    length = queue.length;
    shown = queue.items.length;
    names = await lookUpNames(queue.items, operator, tenant?.id ?? '');
    replace(stats, summary(queue));
    return queue.items;
  };

  const table = pagedTable<QueueEntry>({
    caption: operator ? 'Waiting allocations' : 'Your waiting allocations',
    empty: operator ? 'Nothing is waiting: every allocation has been placed.'
                    : 'Nothing is waiting: all of your allocations have been placed.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (e) => e.id,
    fetchPage: pagesOf(load),
    columns: [
      { header: 'Place', rowHeader: true, className: 'num place', cell: (e) => [String(e.position), h('span', { class: 'small' }, ` of ${length}`)] },
      ...(operator ? [{ header: 'Tenant', cell: (e: QueueEntry) => names.tenants.get(e.tenant_id) ?? e.tenant_id }] : []),
      { header: 'Project', cell: (e) => names.projects.get(e.project_id) ?? h('span', { class: 'mono' }, e.project_id) },
      { header: 'Allocation', cell: (e) => allocationCell(e, names, operator) },
      { header: 'Why it waits', className: 'why', cell: (e) => whyCell(e, operator) },
      { header: 'Asks for', cell: (e) => shapeText(e.shape) },
      { header: 'Priority', cell: (e) => [e.priority_class, e.shape.preemptible === true ? h('span', { class: 'reason' }, 'preemptible') : null] },
      { header: 'Waiting', cell: (e) => [waited(Date.now() - new Date(e.submitted_at).getTime()),
                                          h('span', { class: 'reason' }, 'since ', time(e.submitted_at))] },
      ...(operator ? [{ header: "Tenant's recent use", className: 'num',
                        cell: (e: QueueEntry) => `${formatNumber(e.fair_share_usage / UNIT_SECONDS_PER_GPU_HOUR)} GPU-h` }] : []),
    ],
  });
  const refresh = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
  refresh.addEventListener('click', () => {
    void table.reload().then(() => {
      if (!ctx.signal.aborted) announce(`Queue refreshed: ${plural(shown, 'allocation')} waiting.`);
    });
  });
  ctx.main.append(stats, h('p', null, refresh), table.element);
  if (operator) {
    ctx.main.append(h('p', { class: 'hint' }, "Tenant's recent use is its fair-share figure: GPU-hours held " +
      'recently, decaying with a half-life (24 h by default); among equal priorities the tenant with less goes first.'));
  }
  await table.reload();
}

/** Counts by reason and the longest wait; nothing when nothing waits (the table says so). */
function summary(queue: Queue): HTMLElement | null {
  if (queue.items.length === 0) return null;
  const kinds = queue.items.map((e) => explain(e).kind);
  const oldest = queue.items.reduce((a, b) => (a.submitted_at <= b.submitted_at ? a : b));
  return h('ul', { class: 'stats' },
    h('li', null, h('span', { class: 'stat' }, String(queue.items.length)), ' waiting'),
    h('li', null, h('span', { class: 'stat' }, String(kinds.filter((k) => k === 'quota').length)), ' over quota'),
    h('li', null, h('span', { class: 'stat' }, String(kinds.filter((k) => k === 'capacity').length)), ' waiting for GPUs'),
    h('li', null, 'longest wait ', h('span', { class: 'stat' }, waited(Date.now() - new Date(oldest.submitted_at).getTime()))));
}

function allocationCell(e: QueueEntry, names: Names, operator: boolean): Child {
  const name = names.allocations.get(e.id);
  const id = h('div', { class: 'mono small' }, e.id);
  if (operator) return name ? [name, id] : h('span', { class: 'mono' }, e.id);
  // A tenant's own allocations are on the Allocations page, where they can be released.
  return [h('a', { href: href('/allocations?state=pending'), 'aria-label': `${name ?? e.id} on the Allocations page` },
    name ?? e.id), id];
}

function whyCell(e: QueueEntry, operator: boolean): Child {
  const why = explain(e);
  return [
    badge(why.title, why.kind === 'capacity' ? 'warn' : why.kind === 'quota' ? 'bad' : 'neutral'),
    why.advice ? h('p', { class: 'advice' }, why.advice) : null,
    why.kind === 'capacity' && operator ? h('p', { class: 'advice' }, h('a', { href: href('/fleet') }, 'See the fleet')) : null,
    e.reason ? h('span', { class: 'reason' }, `Scheduler: ${e.reason}`) : null,
  ];
}

/** Names for the ids a queue entry carries; ids stay where a lookup is refused. */
async function lookUpNames(items: QueueEntry[], operator: boolean, tenantId: string): Promise<Names> {
  const names: Names = { tenants: new Map(), projects: new Map(), allocations: new Map() };
  if (items.length === 0) return names;
  const tenants = [...new Set(items.map((e) => e.tenant_id))];
  const [tenantMap, projectMap] = await Promise.all([
    operator ? tenantNames() : Promise.resolve(new Map<string, string>()),
    projectNames(tenants),
  ]);
  names.tenants = tenantMap;
  names.projects = projectMap;
  // Operators read every tenant's pending allocations (GET /v1/allocations), a tenant its own.
  const listing = operator ? '/v1/allocations' : `/v1/tenants/${seg(tenantId)}/allocations`;
  try {
    for (const a of await listAll<Allocation>(listing, 10000, { state: 'pending' })) names.allocations.set(a.id, a.name);
  } catch {
    // The ids are shown instead (servers before GET /v1/allocations have no platform-wide listing).
  }
  return names;
}
