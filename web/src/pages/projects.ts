// A tenant's projects: the list and, for those allowed to, a form to create one.
import { describeError, list, post, seg } from '../api';
import { field, h, replace } from '../dom';
import { time } from '../format';
import type { RouteContext } from '../router';
import { isTenantAdmin, type Session } from '../session';
import { checkLabel, errorBox, successBox } from '../status';
import { pagedTable } from '../table';
import type { Project } from '../types';

export async function renderProjects(ctx: RouteContext, sess: Session): Promise<void> {
  const tenant = sess.tenant;
  ctx.main.append(h('h1', null, 'Projects'));
  if (!tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so you have no projects here.'));
    return;
  }
  const base = `/v1/tenants/${seg(tenant.id)}/projects`;
  const table = pagedTable<Project>({
    caption: `Projects of ${tenant.name}`,
    empty: 'No projects yet.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (p) => p.id,
    fetchPage: (after, limit) => list<Project>(base, after, limit),
    columns: [
      { header: 'Name', rowHeader: true, cell: (p) => h('span', { class: 'name' }, p.name) },
      { header: 'Display name', cell: (p) => p.display_name },
      { header: 'Created', cell: (p) => time(p.created_at) },
      { header: 'ID', cell: (p) => h('span', { class: 'mono' }, p.id) },
    ],
  });

  if (isTenantAdmin(sess.principal)) {
    const result = h('div', { class: 'result-slot' });
    const name = h('input', { name: 'name', required: true, maxlength: 63, autocomplete: 'off',
                              pattern: '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?', spellcheck: 'false' });
    const display = h('input', { name: 'display_name', maxlength: 200, autocomplete: 'off' });
    const submit = h('button', { type: 'submit' }, 'Create project');
    const form = h('form', { class: 'inline-form', 'aria-labelledby': 'create-project-heading' },
      h('h2', { id: 'create-project-heading' }, 'Create a project'),
      field('Name', name, 'Lower-case letters, digits and hyphens (a DNS label), for example training.'),
      field('Display name (optional)', display),
      submit, result);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      void (async () => {
        replace(result);
        if (!checkLabel(name, result)) return;
        submit.disabled = true;
        try {
          const body: Record<string, string> = { name: name.value.trim() };
          if (display.value.trim()) body.display_name = display.value.trim();
          const p = await post<Project>(base, body);
          name.value = '';
          display.value = '';
          replace(result, successBox(`Project ${p.name} created.`));
          await table.reload();
        } catch (err) {
          replace(result, errorBox(`Could not create the project: ${describeError(err)}`));
          name.focus();
        } finally {
          submit.disabled = false;
        }
      })();
    });
    ctx.main.append(form);
  }
  ctx.main.append(table.element);
  await table.reload();
}
