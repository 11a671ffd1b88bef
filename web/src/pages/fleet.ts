// Operators' fleet: the summary by model and node state, every node with its GPUs drawn (MIG
// instances and shares coloured by the tenant holding them), and one node's detail.
import { describeError, get, list, post, seg } from '../api';
import { confirmDialog } from '../dialog';
import { field, h, replace, scrollBox } from '../dom';
import { badge, bytes, plural, time } from '../format';
import { allocationsOnNode, describeHeld, holderIndex, loadHolders, loadLiveAllocations,
         MAX_LIVE_ALLOCATIONS, type LiveAllocations, type NodeAllocation } from '../holders';
import { gpuSvg, HolderIndex, legend, memorySlices, migInstances, TenantColours } from '../mig';
import { projectNames } from '../names';
import { href, type RouteContext } from '../router';
import { normalizeRole, session } from '../session';
import { errorBox, loading, successBox } from '../status';
import { pagedTable } from '../table';
import type { GpuHolders } from '../mig';
import type { FleetSummary, Gpu, Node, NodeWithGpus } from '../types';

function summarySection(summary: FleetSummary): HTMLElement {
  const models = Object.entries(summary.gpus_by_model);
  const states = Object.entries(summary.nodes_by_state);
  return h('section', { class: 'summary', 'aria-labelledby': 'summary-heading' },
    h('h2', { id: 'summary-heading' }, 'Summary'),
    h('ul', { class: 'stats' },
      h('li', null, h('span', { class: 'stat' }, String(summary.gpus_total)), ' GPUs'),
      states.map(([state, n]) => h('li', null, h('span', { class: 'stat' }, String(n)), ` ${state} ${n === 1 ? 'node' : 'nodes'}`))),
    models.length === 0 ? h('p', { class: 'empty' }, 'No GPUs are enrolled yet.') :
      scrollBox(h('table', null,
        h('caption', null, 'GPUs by model'),
        h('thead', null, h('tr', null, ['Model', 'Total', 'Healthy', 'Unhealthy', 'Missing', 'Allocated', 'Free', 'Modes']
          .map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, models.map(([model, m]) => h('tr', null,
          h('th', { scope: 'row' }, model),
          h('td', { class: 'num' }, String(m.total)), h('td', { class: 'num' }, String(m.healthy)),
          h('td', { class: 'num' }, String(m.unhealthy)), h('td', { class: 'num' }, String(m.missing)),
          h('td', { class: 'num' }, String(m.allocated)), h('td', { class: 'num' }, String(m.free)),
          h('td', null, Object.entries(m.by_mode).map(([mode, n]) => `${n} ${mode}`).join(', '))))))));
}

export async function renderFleet(ctx: RouteContext): Promise<void> {
  const summarySlot = h('div', null, loading('the fleet summary'));
  const legendSlot = h('div', { class: 'legend-slot' });
  ctx.main.append(
    h('h1', null, 'Fleet'),
    h('p', { class: 'lead' }, 'Nodes, their GPUs and who holds them. ',
      h('a', { href: '/v1/fleet/map.svg', target: '_blank', rel: 'noopener' }, 'Open the fleet map (SVG)')),
    summarySlot);

  const colours = new TenantColours();
  let gpusByNode = new Map<string, Gpu[]>();
  let holders = new HolderIndex();

  const nodes = pagedTable<Node>({
    caption: 'Nodes',
    empty: 'No nodes yet. Enroll one with a join token (gpuplane node join-token) or import an inventory.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (n) => n.id,
    fetchPage: (after, limit) => list<Node>('/v1/nodes', after, limit),
    columns: [
      { header: 'Node', rowHeader: true, cell: (n) => h('a', { href: href(`/fleet/nodes/${encodeURIComponent(n.id)}`) }, n.name) },
      { header: 'State', cell: (n) => [badge(n.state), n.cordoned ? [' ', badge('cordoned', 'warn')] : null,
                                       n.state_reason ? h('span', { class: 'reason' }, n.state_reason) : null] },
      { header: 'Health', cell: (n) => {
        const gpus = gpusByNode.get(n.id) ?? [];
        const bad = gpus.filter((g) => g.health !== 'healthy').length;
        return gpus.length === 0 ? 'no GPUs' : bad === 0 ? badge('healthy') : badge(`${bad} of ${gpus.length} GPUs unhealthy`, 'bad');
      } },
      { header: 'GPUs', className: 'gpus', cell: (n) => {
        const gpus = gpusByNode.get(n.id) ?? [];
        return gpus.length === 0 ? '—' : h('div', { class: 'gpu-row' },
          gpus.map((g) => gpuSvg(g, holders.of(g.uuid), colours, 132, 28)));
      } },
      { header: 'Rack', cell: (n) => n.rack || '—' },
      { header: 'Last heartbeat', cell: (n) => time(n.last_heartbeat, n.source === 'agent' ? 'never' : 'imported') },
    ],
  });

  ctx.main.append(legendSlot, nodes.element);

  try {
    const [summary, gpus, held] = await Promise.all([
      get<FleetSummary>('/v1/fleet/summary', undefined, { signal: ctx.signal }),
      get<{ items: Gpu[] }>('/v1/gpus', undefined, { signal: ctx.signal }),
      loadHolders(ctx.signal).catch(() => ({ index: new HolderIndex(), partial: true })),
    ]);
    if (ctx.signal.aborted) return;
    replace(summarySlot, summarySection(summary));
    gpusByNode = new Map();
    for (const g of gpus.items) {
      const l = gpusByNode.get(g.node_id) ?? [];
      l.push(g);
      gpusByNode.set(g.node_id, l);
    }
    for (const l of gpusByNode.values()) l.sort((a, b) => a.index - b.index);
    holders = held.index;
    // Colours in tenant-name order, so a tenant keeps its colour across reloads of the page.
    for (const t of holders.tenants()) colours.of(t.id);
    replace(legendSlot, h('h2', { class: 'visually-hidden' }, 'Colour key'), legend(holders, colours),
      held.partial ? h('p', { class: 'hint' }, `Only the first ${MAX_LIVE_ALLOCATIONS} live allocations of each state are coloured.`) : null);
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(summarySlot, errorBox(`Could not load the fleet: ${describeError(err)}`));
  }
  await nodes.reload();
}

function migList(g: Gpu, held: GpuHolders | undefined): HTMLElement | string {
  const instances = migInstances(g, held);
  if (instances.length === 0) return g.mode === 'mig' ? 'none' : '—';
  return h('ul', { class: 'plain' }, instances.map((m) => {
    const slices = memorySlices(g.model, m.profile);
    const where = slices === 1 ? `slice ${m.start}` : `slices ${m.start}–${m.start + slices - 1}`;
    const holder = held?.mig.get(m.start);
    const planned = g.mode !== 'mig' || !g.mig_instances.some((x) => x.start === m.start);
    return h('li', null, `${m.profile} at ${where}: `,
      holder ? `${holder.tenantName} (${holder.allocationName})` : 'free', planned ? ' (planned)' : '');
  }));
}


/** Platform admins and operators may change a node's state (fleet.write); the server decides. */
function canWriteFleet(): boolean {
  const p = session()?.principal;
  return !!p && p.role_bindings.some(
    (b) => b.tenant_id === null && ['platform-admin', 'platform-operator'].includes(normalizeRole(b.role)));
}

/** The allocations held on a node: tenant, project, allocation, state, what it holds here. */
function nodeAllocationsTable(items: NodeAllocation[], projects: Map<string, string>, caption: string): HTMLElement {
  return scrollBox(h('table', { class: 'node-allocations' },
    h('caption', null, caption),
    h('thead', null, h('tr', null, ['Allocation', 'Tenant', 'Project', 'State', 'Holds on this node']
      .map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, items.map(({ allocation: a, tenantName, gpus }) => h('tr', { 'data-allocation': a.id },
      h('th', { scope: 'row' }, a.name, h('div', { class: 'mono small' }, a.id)),
      h('td', null, tenantName),
      h('td', null, projects.get(a.project_id) ?? a.project_id),
      h('td', null, badge(a.state)),
      h('td', null, gpus.length === 0 ? 'the whole node' :
        h('ul', { class: 'plain' }, gpus.map((g) => h('li', null, describeHeld(g))))))))));
}

type Loaded<T> = { ok: true; value: T } | { ok: false; error: unknown };
function settle<T>(p: Promise<T>): Promise<Loaded<T>> {
  return p.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));
}

export async function renderNode(ctx: RouteContext): Promise<void> {
  const id = ctx.params.node ?? '';
  const heading = h('h1', null, 'Node');
  const body = h('div', null, loading('the node'));
  ctx.main.append(h('p', { class: 'breadcrumb' }, h('a', { href: href('/fleet') }, 'Fleet'), ' › '), heading, body);
  let node: NodeWithGpus;
  const liveLoad = settle(loadLiveAllocations(ctx.signal));
  try {
    node = await get<NodeWithGpus>(`/v1/nodes/${seg(id)}`, undefined, { signal: ctx.signal });
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(body, errorBox(`Could not load node ${id}: ${describeError(err)}`));
    return;
  }
  const firstLive = await liveLoad;
  if (ctx.signal.aborted) return;
  heading.textContent = `Node ${node.name}`;
  document.title = `Node ${node.name} · gpuplane`;
  const holders = firstLive.ok ? holderIndex(firstLive.value) : new HolderIndex();
  const colours = new TenantColours();
  for (const t of holders.tenants()) colours.of(t.id);

  // ---- facts (re-drawn when an action changes the node) ----
  const factsSlot = h('div');
  const dl = (pairs: [string, Node[keyof Node] | HTMLElement | string][]) => h('dl', { class: 'facts' },
    pairs.map(([k, v]) => [h('dt', null, k), h('dd', null, v instanceof HTMLElement ? v : String(v ?? '—'))]));
  const renderFacts = (): void => replace(factsSlot, dl([
    ['State', h('span', { 'data-testid': 'node-state' }, badge(node.state), node.cordoned ? [' ', badge('cordoned', 'warn')] : null)],
    ['Reason', node.state_reason || '—'],
    ['Schedulable', node.schedulable ? 'yes' : 'no'],
    ['Pool', node.pool_id ?? 'shared'],
    ['Rack', node.rack || '—'],
    ['NVLink domain', node.nvlink_domain || '—'],
    ['CPU', `${node.cpu_millis / 1000} cores`],
    ['Memory', bytes(node.memory_bytes)],
    ['Source', node.source],
    ['Last heartbeat', h('span', null, time(node.last_heartbeat, 'never'))],
    ['Enrolled', h('span', null, time(node.created_at))],
    ['ID', node.id],
  ]));
  renderFacts();

  // ---- allocations on this node (from the platform's live allocations) ----
  let onNode: NodeAllocation[] | null = null;
  let onNodeError = '';
  let partial = false;
  let projects = new Map<string, string>();
  const allocBody = h('div', null, loading('the allocations on this node'));
  const showAllocations = async (live: Loaded<LiveAllocations>): Promise<void> => {
    if (!live.ok) {
      onNode = null;
      onNodeError = describeError(live.error);
      replace(allocBody, errorBox(`Could not list the allocations on this node: ${onNodeError}`,
        h('button', { type: 'button', onClick: () => void reloadAllocations() }, 'Retry')));
      return;
    }
    const items = allocationsOnNode(live.value, node.id);
    projects = await projectNames(items.map((x) => x.allocation.tenant_id));
    if (ctx.signal.aborted) return;
    onNode = items;
    onNodeError = '';
    partial = live.value.partial;
    replace(allocBody,
      items.length === 0 ? h('p', { class: 'empty' }, 'No allocation is placed on this node.') :
        nodeAllocationsTable(items, projects, `${plural(items.length, 'allocation')} placed or active on this node`),
      partial ? h('p', { class: 'hint' }, `Only the first ${MAX_LIVE_ALLOCATIONS} live allocations of each state were read.`) : null);
  };
  const reloadAllocations = async (): Promise<void> => {
    replace(allocBody, loading('the allocations on this node'));
    await showAllocations(await settle(loadLiveAllocations(ctx.signal)));
  };

  // ---- node actions (platform admins and operators) ----
  let actions: HTMLElement | null = null;
  if (canWriteFleet()) {
    const buttons = h('div', { class: 'node-actions' });
    const result = h('div', { class: 'action-result' });
    const done = (message: string): void => {
      const notice = successBox(message);
      notice.tabIndex = -1;
      replace(result, notice);
      notice.focus();
    };
    const send = (verb: string, reason: string): Promise<Node> =>
      post<Node>(`/v1/nodes/${seg(node.id)}/${verb}`, reason ? { reason } : {});
    const applied = (updated: Node): void => {
      node = { ...node, ...updated };
      renderFacts();
      renderButtons();
    };
    const simple = (verb: string, label: string, message: () => string): HTMLButtonElement => {
      const b = h('button', { type: 'button', class: 'secondary' }, label);
      b.addEventListener('click', () => {
        b.disabled = true;
        replace(result);
        send(verb, '').then((updated) => {
          applied(updated);
          done(message());
        }, (err: unknown) => {
          b.disabled = false;
          replace(result, errorBox(`Could not ${verb} node ${node.name}: ${describeError(err)}`));
        });
      });
      return b;
    };
    const renderButtons = (): void => {
      const list: HTMLElement[] = [];
      if (node.state === 'ready') {
        const drain = h('button', { type: 'button', class: 'danger' }, 'Drain');
        drain.addEventListener('click', () => openDrain(drain));
        list.push(drain);
      }
      if (node.state === 'draining' || node.state === 'maintenance')
        list.push(simple('resume', 'Resume', () => `Node ${node.name} resumed: its state is now ${node.state}; it takes new placements${node.cordoned ? ' once uncordoned' : ''}.`));
      if (node.state !== 'retired')
        list.push(node.cordoned
          ? simple('uncordon', 'Uncordon', () => `Node ${node.name} uncordoned.`)
          : simple('cordon', 'Cordon', () => `Node ${node.name} cordoned: it takes no new placements; its allocations stay.`));
      replace(buttons, list.length ? list : h('p', { class: 'empty' }, 'A retired node takes no actions.'));
    };

    // Drain asks first, in a modal confirmation listing what runs on the node.
    const openDrain = (trigger: HTMLButtonElement): void => {
      const reason = h('textarea', { name: 'reason', rows: 3, maxlength: 500 });
      const affected: HTMLElement[] = [];
      if (onNode === null)
        affected.push(onNodeError
          ? h('div', { class: 'notice warning' }, h('p', null, `The allocations on this node could not be listed: ${onNodeError}`))
          : h('p', null, 'The allocations on this node are still being read.'));
      else if (onNode.length === 0)
        affected.push(h('p', { class: 'empty' }, 'No allocation is on this node; draining only stops new placements.'));
      else
        affected.push(h('p', null, `${plural(onNode.length, 'allocation')} on this node ${onNode.length === 1 ? 'keeps' : 'keep'} ` +
                                   'its GPUs through the drain; nothing new is placed here.'),
                      nodeAllocationsTable(onNode, projects, 'Allocations the drain affects'));
      if (partial) affected.push(h('p', { class: 'hint' }, `Only the first ${MAX_LIVE_ALLOCATIONS} live allocations of each state were read.`));
      confirmDialog({
        title: `Drain node ${node.name}?`,
        description: 'A drained node takes no new placements. Allocations on it keep running until they end, ' +
                     'and then the node goes to maintenance; ' +
                     'Resume makes the node ready again.',
        body: [affected,
               field('Reason (optional)', reason, "Kept as the node's state reason and in the audit trail; at most 500 characters.")],
        confirmLabel: `Drain ${node.name}`,
        cancelled: 'Drain cancelled.',
        failure: `Could not drain node ${node.name}`,
        trigger,
        initialFocus: reason,
        testId: 'drain-dialog',
        run: () => send('drain', reason.value.trim()),
        done: (updated) => {
          const count = onNode?.length ?? 0;
          applied(updated);
          // The control plane moves a draining node to maintenance once the last allocation ends.
          done(`Node ${node.name} drained: its state is now ${node.state}. ` +
               (node.state === 'draining' && count
                 ? `${plural(count, 'allocation')} on it ${count === 1 ? 'keeps' : 'keep'} running; ` +
                   'the node goes to maintenance when the last one ends. '
                 : '') +
               'No new allocation is placed on it.');
          void reloadAllocations();
        },
      });
    };

    renderButtons();
    actions = h('section', { 'aria-labelledby': 'actions-heading', class: 'node-actions-section' },
      h('h2', { id: 'actions-heading' }, 'Node actions'),
      h('p', { class: 'hint' }, 'Drain and Cordon stop new placements; allocations already on the node keep running. ' +
                                'Resume makes a drained node ready again.'),
      buttons, result);
  }

  const gpus = [...node.gpus].sort((a, b) => a.index - b.index);
  replace(body,
    factsSlot,
    actions,
    h('section', { 'aria-labelledby': 'allocs-heading' },
      h('h2', { id: 'allocs-heading' }, 'Allocations on this node'),
      allocBody),
    h('section', { 'aria-labelledby': 'gpus-heading' },
      h('h2', { id: 'gpus-heading' }, `GPUs (${gpus.length})`),
      legend(holders, colours),
      gpus.length === 0 ? h('p', { class: 'empty' }, 'This node reports no GPUs.') :
        scrollBox(h('table', null,
          h('caption', { class: 'visually-hidden' }, 'GPUs of the node'),
          h('thead', null, h('tr', null, ['GPU', 'Model', 'Memory', 'Mode', 'Health', 'Layout', 'MIG instances']
            .map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', null, gpus.map((g) => {
            const held = holders.of(g.uuid);
            return h('tr', null,
              h('th', { scope: 'row' }, `#${g.index}`, h('div', { class: 'mono small' }, g.uuid)),
              h('td', null, g.model),
              h('td', null, bytes(g.memory_bytes)),
              h('td', null, g.mode),
              h('td', null, badge(g.health), g.health_reason ? h('div', { class: 'reason' }, g.health_reason) : null),
              h('td', null, gpuSvg(g, held, colours, 240, 34)),
              h('td', null, migList(g, held)));
          }))))),
    h('p', { class: 'hint' }, plural(gpus.length, 'GPU'), ' shown. Memory slices run 0–7 from left to right.'));
  await showAllocations(firstLive);
}
