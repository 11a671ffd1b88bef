// A tenant's allocations (state, and why a pending one waits) and a request form that asks the
// scheduler first (?dry_run=true) and submits only when the user confirms.
import { describeError, get, list, post, seg } from '../api';
import { field, h, replace } from '../dom';
import { badge, time } from '../format';
import type { RouteContext } from '../router';
import { isTenantAdmin, type Session } from '../session';
import { announce, errorBox, successBox } from '../status';
import { visibleProjects } from '../projects';
import { pagedTable } from '../table';
import type { Allocation, DryRun, Offering, Placement, Project, Shape } from '../types';

const STATES = ['', 'pending', 'placed', 'active', 'released', 'preempted', 'failed', 'expired'];

export function shapeText(shape: Shape): string {
  const parts: string[] = [];
  if (shape.count !== undefined) parts.push(`${shape.count} ×`);
  if (shape.tier) parts.push(shape.tier);
  if (shape.mig_profile) parts.push(shape.mig_profile);
  if (shape.milli) parts.push(`${shape.milli} milli-GPU`);
  if (shape.models?.length) parts.push(shape.models.join(' or '));
  return parts.join(' ') || JSON.stringify(shape);
}

function placementText(p: Placement): string {
  return `${p.gpus.length} × ${p.model} (${p.tier}, ${p.gpu_equivalents}-equivalents) on ${p.nodes.length === 1 ? 'node' : 'nodes'} ${p.nodes.join(', ')}`;
}

export async function renderAllocations(ctx: RouteContext, sess: Session): Promise<void> {
  const tenant = sess.tenant;
  ctx.main.append(h('h1', null, 'Allocations'));
  if (!tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so you have no allocations here.'));
    return;
  }
  const tenantPath = `/v1/tenants/${seg(tenant.id)}`;
  const admin = isTenantAdmin(sess.principal);
  const projects = await visibleProjects(ctx, sess, tenantPath, admin);
  if (!projects) return;
  const projectName = new Map(projects.map((p) => [p.id, p.name]));

  // Filters: which project (all of them for tenant admins) and which state.
  const projectFilter = h('select', { name: 'project' },
    admin ? h('option', { value: '' }, 'All projects') : null,
    projects.map((p) => h('option', { value: p.id }, p.name)));
  const stateFilter = h('select', { name: 'state' },
    STATES.map((st) => h('option', { value: st, selected: (ctx.query.get('state') ?? '') === st }, st || 'any')));
  const filters = h('form', { class: 'filters', 'aria-label': 'Filter allocations' },
    field('Project', projectFilter), field('State', stateFilter), h('button', { type: 'submit' }, 'Show'));

  const table = pagedTable<Allocation>({
    caption: 'Allocations',
    empty: 'No allocations match.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (a) => a.id,
    fetchPage: (after, limit) => {
      const path = projectFilter.value
        ? `${tenantPath}/projects/${seg(projectFilter.value)}/allocations`
        : `${tenantPath}/allocations`;
      return list<Allocation>(path, after, limit, { state: stateFilter.value });
    },
    columns: [
      { header: 'Name', rowHeader: true, cell: (a) => [h('span', { class: 'name' }, a.name), h('div', { class: 'mono small' }, a.id)] },
      { header: 'Project', cell: (a) => projectName.get(a.project_id) ?? a.project_id },
      { header: 'State', cell: (a) => badge(a.state) },
      { header: 'Why / where', cell: (a) => a.state === 'pending'
          ? h('span', { class: 'reason' }, a.reason_code ? `${a.reason_code.replace(/_/g, ' ')}: ` : '', a.reason || 'waiting')
          : a.placement ? placementText(a.placement) : a.reason || '—' },
      { header: 'Shape', cell: (a) => shapeText(a.shape) },
      { header: 'Created', cell: (a) => time(a.created_at) },
      { header: 'Placed', cell: (a) => time(a.placed_at) },
    ],
  });
  filters.addEventListener('submit', (e) => {
    e.preventDefault();
    void table.reload();
  });

  if (projects.length > 0) ctx.main.append(requestForm(ctx, tenantPath, projects, () => table.reload()));
  else ctx.main.append(h('p', { class: 'hint' }, 'Create a project first: allocations belong to a project.'));
  ctx.main.append(filters, table.element);
  await table.reload();
}

function requestForm(ctx: RouteContext, tenantPath: string, projects: Project[],
                     reload: () => Promise<void>): HTMLElement {
  const project = h('select', { name: 'project', required: true },
    projects.map((p) => h('option', { value: p.id }, p.name)));
  const offering = h('select', { name: 'offering', required: true },
    h('option', { value: '' }, 'Loading offerings…'));
  const count = h('input', { name: 'count', type: 'number', min: 1, max: 1000, value: '1', required: true, inputmode: 'numeric' });
  const name = h('input', { name: 'name', maxlength: 63, autocomplete: 'off', spellcheck: 'false',
                            pattern: '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?' });
  const check = h('button', { type: 'submit' }, 'Check availability');
  const answer = h('div', { class: 'result-slot', 'aria-live': 'polite' });
  const form = h('form', { class: 'inline-form', 'aria-labelledby': 'request-heading' },
    h('h2', { id: 'request-heading' }, 'Request an allocation'),
    h('p', { class: 'hint' }, 'The scheduler first answers whether and where it would be placed now; nothing is requested until you confirm.'),
    field('Project', project), field('Offering', offering), field('Count', count),
    field('Name (optional)', name, 'A DNS label; the allocation id is used without one.'),
    check, answer);

  void get<{ items: Offering[] }>(`${tenantPath}/offerings`, undefined, { signal: ctx.signal }).then((res) => {
    const usable = res.items.filter((o) => o.allowed !== false);
    replace(offering, usable.length === 0 ? h('option', { value: '' }, 'No offerings available to this tenant') :
      usable.map((o) => h('option', { value: o.name },
        `${o.name} — ${o.tier}${o.mig_profile ? ` ${o.mig_profile}` : ''}${o.milli ? ` ${o.milli} milli` : ''} on ${o.models.join('/')}${o.gpus > 1 ? `, ${o.gpus} GPUs` : ''}`)));
  }).catch((err: unknown) => {
    if (!ctx.signal.aborted) replace(offering, h('option', { value: '' }, `Offerings could not be loaded: ${describeError(err)}`));
  });

  const body = (): Record<string, string | number> => {
    const b: Record<string, string | number> = { offering: offering.value, count: Number(count.value) };
    if (name.value.trim()) b.name = name.value.trim();
    return b;
  };
  const path = () => `${tenantPath}/projects/${seg(project.value)}/allocations`;

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    void (async () => {
      replace(answer);
      if (!offering.value) {
        replace(answer, errorBox('Choose an offering.'));
        offering.focus();
        return;
      }
      if (!count.checkValidity() || !name.checkValidity()) {
        replace(answer, errorBox('Count must be a whole number of at least 1, and the name a DNS label.'));
        return;
      }
      check.disabled = true;
      const requested = body();
      const where = path();
      try {
        const dry = await post<DryRun>(`${where}?dry_run=true`, requested);
        const submit = h('button', { type: 'button' }, dry.would_place ? 'Request it' : 'Request it anyway (it will wait)');
        const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
        cancel.addEventListener('click', () => {
          replace(answer);
          check.focus();
        });
        submit.addEventListener('click', () => {
          submit.disabled = true;
          void (async () => {
            try {
              const a = await post<Allocation>(where, requested);
              replace(answer, successBox(a.state === 'pending'
                ? `Allocation ${a.name} is waiting: ${a.reason}`
                : `Allocation ${a.name} is ${a.state}.`));
              check.focus();
              await reload();
            } catch (err) {
              submit.disabled = false;
              replace(answer, errorBox(`The request was refused: ${describeError(err)}`));
            }
          })();
        });
        replace(answer, h('div', { class: `notice ${dry.would_place ? 'success' : 'warning'}`, 'data-testid': 'dry-run' },
          h('p', null, dry.would_place && dry.placement
            ? `It would be placed now: ${placementText(dry.placement)}.`
            : `It would wait: ${dry.reason ?? 'no room now'}${dry.reason_code ? ` (${dry.reason_code.replace(/_/g, ' ')})` : ''}.`),
          h('p', null, submit, ' ', cancel)));
        announce(dry.would_place ? 'It would be placed now. Confirm to request it.' : 'It would wait. You may still request it.');
        submit.focus();
      } catch (err) {
        replace(answer, errorBox(`The scheduler refused this request: ${describeError(err)}`));
      } finally {
        check.disabled = false;
      }
    })();
  });
  return form;
}
