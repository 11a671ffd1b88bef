// What the insight pages (queue, usage, SLA) share: tenant names for operators' views, and paging
// through lists the API answers whole (the queue, an SLA month) with the usual paged table.
import { listAll } from '../api';
import type { Page, Tenant } from '../types';

/** Tenant names by id; ids stand in for names when the listing is refused. */
export async function tenantNames(): Promise<Map<string, string>> {
  try {
    return new Map((await listAll<Tenant>('/v1/tenants', 10000)).map((t) => [t.id, t.name]));
  } catch {
    return new Map();
  }
}

/**
 * A `fetchPage` for pagedTable over a list the API returns in one answer: the first page loads
 * it (so Retry and reload ask the server again), later pages are slices; the cursor is the offset.
 */
export function pagesOf<T>(load: () => Promise<T[]>): (after: string | null, limit: number) => Promise<Page<T>> {
  let items: T[] = [];
  return async (after, limit) => {
    if (after === null) items = await load();
    const start = Number(after ?? 0);
    const end = start + limit;
    return { items: items.slice(start, end), next: end < items.length ? String(end) : null };
  };
}
