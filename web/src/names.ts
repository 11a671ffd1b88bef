// Names for the ids the API answers with: tenants (operators) and projects, read once per page.
import { listAll, seg } from './api';
import type { Project, Tenant } from './types';

/** Tenant names by id; ids stand in for names when the listing is refused. */
export async function tenantNames(): Promise<Map<string, string>> {
  try {
    return new Map((await listAll<Tenant>('/v1/tenants', 10000)).map((t) => [t.id, t.name]));
  } catch {
    return new Map();
  }
}

/** Project names by id for the given tenants (ids stand in where a listing is refused). */
export async function projectNames(tenantIds: Iterable<string>): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  await Promise.all([...new Set(tenantIds)].map(async (t) => {
    try {
      for (const p of await listAll<Project>(`/v1/tenants/${seg(t)}/projects`, 1000)) names.set(p.id, p.name);
    } catch {
      // The id is shown instead.
    }
  }));
  return names;
}
