// Who holds the fleet's GPUs, read from the platform-wide allocation listing (GET
// /v1/allocations, operators): the fleet page colours GPUs by holder, a node's page lists the
// allocations placed on it.
import { listAll } from './api';
import { HolderIndex } from './mig';
import { tenantNames } from './names';
import type { Allocation, PlacementGpu } from './types';

// Past this many live allocations of one state the listing stops, and the page says so.
export const MAX_LIVE_ALLOCATIONS = 10_000;
const LIVE_STATES = ['placed', 'active'];

export interface LiveAllocation {
  allocation: Allocation;
  tenantName: string;
}

export interface LiveAllocations {
  items: LiveAllocation[];
  /** More live allocations than were read: some GPUs show as free. */
  partial: boolean;
}

/** Every tenant's placed and active allocations, with the tenants' names. */
export async function loadLiveAllocations(signal: AbortSignal): Promise<LiveAllocations> {
  const [names, ...byState] = await Promise.all([
    tenantNames(),
    ...LIVE_STATES.map((state) => listAll<Allocation>('/v1/allocations', MAX_LIVE_ALLOCATIONS, { state })),
  ]);
  const items: LiveAllocation[] = [];
  let partial = false;
  if (!signal.aborted) {
    for (const allocs of byState) {
      partial ||= allocs.length >= MAX_LIVE_ALLOCATIONS;
      for (const a of allocs) items.push({ allocation: a, tenantName: names.get(a.tenant_id) ?? a.tenant_id });
    }
  }
  return { items, partial };
}

/** The GPUs each live allocation holds, indexed by GPU. */
export function holderIndex(live: LiveAllocations): HolderIndex {
  const index = new HolderIndex();
  for (const { allocation, tenantName } of live.items) index.add(allocation, tenantName);
  return index;
}

export async function loadHolders(signal: AbortSignal): Promise<{ index: HolderIndex; partial: boolean }> {
  const live = await loadLiveAllocations(signal);
  return { index: holderIndex(live), partial: live.partial };
}

export interface NodeAllocation extends LiveAllocation {
  /** What the allocation holds on this node: whole GPUs, MIG instances or shares. */
  gpus: PlacementGpu[];
}

/** The live allocations whose placement includes node `nodeId`, by tenant then name. */
export function allocationsOnNode(live: LiveAllocations, nodeId: string): NodeAllocation[] {
  const out: NodeAllocation[] = [];
  for (const item of live.items) {
    const p = item.allocation.placement;
    if (!p) continue;
    const gpus = p.gpus.filter((g) => g.node === nodeId);
    if (!p.nodes.includes(nodeId) && gpus.length === 0) continue;
    out.push({ ...item, gpus });
  }
  return out.sort((a, b) => a.tenantName.localeCompare(b.tenantName) ||
                            a.allocation.name.localeCompare(b.allocation.name));
}

/** "GPU 0: 1g.5gb at slice 6", "GPU 1 (whole)", "GPU 2: 250 milli-GPU". */
export function describeHeld(g: PlacementGpu): string {
  if (g.mig) return `GPU ${g.index}: ${g.mig.profile} at slice ${g.mig.start}`;
  if (g.milli) return `GPU ${g.index}: ${g.milli} milli-GPU`;
  return `GPU ${g.index} (whole)`;
}
