// The projects of a tenant that a page lists for the signed-in user.
import { describeError, listAll } from './api';
import type { RouteContext } from './router';
import { boundProjects, type Session } from './session';
import { errorBox } from './status';
import type { Project } from './types';

/**
 * The tenant's projects (`tenantPath` is `/v1/tenants/{id}`): all of them when `wholeTenant`,
 * else those the user holds a role in (all, when it holds none in a single project). A failed
 * load is shown on the page and lists none; null once the page has been left.
 */
export async function visibleProjects(
  ctx: RouteContext,
  sess: Session,
  tenantPath: string,
  wholeTenant: boolean,
): Promise<Project[] | null> {
  let projects: Project[] = [];
  try {
    projects = await listAll<Project>(`${tenantPath}/projects`, 1000);
  } catch (err) {
    if (ctx.signal.aborted) return null;
    ctx.main.append(errorBox(`Could not load the projects: ${describeError(err)}`));
  }
  if (ctx.signal.aborted) return null;
  if (!wholeTenant) {
    const mine = new Set(boundProjects(sess.principal));
    if (mine.size) projects = projects.filter((p) => mine.has(p.id));
  }
  return projects;
}
