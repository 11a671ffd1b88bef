// Who is logged in, and what the console shows them: platform pages for platform roles, tenant
// pages for principals of a tenant. The server decides every request; this only shapes the nav.
import { ApiError, get, listAll } from './api';
import type { Principal, Tenant } from './types';

export interface Session {
  principal: Principal;
  /** The principal's own tenant (name resolved when it could be read). */
  tenant: { id: string; name: string } | null;
}

const PLATFORM_ROLES = ['platform-admin', 'platform-operator', 'auditor'];

/** Role names as the server spells them ("tenant-admin"). */
export function normalizeRole(role: string): string {
  return role.toLowerCase();
}

export function roles(p: Principal): string[] {
  return p.role_bindings.map((b) => normalizeRole(b.role));
}

export function hasRole(p: Principal, ...wanted: string[]): boolean {
  return roles(p).some((r) => wanted.includes(r));
}

/** Platform roles bound at platform scope. */
export function isPlatform(p: Principal): boolean {
  return p.role_bindings.some(
    (b) => b.tenant_id === null && PLATFORM_ROLES.includes(normalizeRole(b.role)));
}

export function canReadAudit(p: Principal): boolean {
  return hasRole(p, 'platform-admin', 'auditor');
}

/** Tenant-wide roles (as opposed to roles in single projects). */
export function isTenantAdmin(p: Principal): boolean {
  return p.role_bindings.some(
    (b) => b.tenant_id !== null && b.project_id === null && normalizeRole(b.role) === 'tenant-admin');
}

export function tenantOf(p: Principal): string | null {
  if (p.tenant_id) return p.tenant_id;
  const bound = p.role_bindings.find((b) => b.tenant_id !== null);
  return bound?.tenant_id ?? null;
}

/** The principal's projects where it is bound at project scope. */
export function boundProjects(p: Principal): string[] {
  return p.role_bindings.flatMap((b) => (b.project_id ? [b.project_id] : []));
}

let current: Session | null = null;

export function session(): Session | null {
  return current;
}

export function clearSession(): void {
  current = null;
}

/** Asks the server who we are; null when not logged in. */
export async function loadSession(): Promise<Session | null> {
  let principal: Principal;
  try {
    principal = await get<Principal>('/v1/whoami', undefined, { quiet401: true });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      current = null;
      return null;
    }
    throw err;
  }
  const tenantId = tenantOf(principal);
  let tenant: Session['tenant'] = null;
  if (tenantId) {
    tenant = { id: tenantId, name: tenantId };
    try {
      // The listing is filtered to what the caller reaches: its own tenant.
      const mine = await listAll<Tenant>('/v1/tenants', 10);
      const t = mine.find((x) => x.id === tenantId);
      if (t) tenant = { id: t.id, name: t.name };
    } catch {
      // The id is enough to work with.
    }
  }
  current = { principal, tenant };
  return current;
}
