// A tenant's members: its users and service accounts with the roles bound to each, where each
// binding came from (its `source`: "api", or "oidc:<provider>" for the roles the identity
// provider's rules set again at every login), and (tenant admins) granting a role and revoking one
// after a confirmation.
import { del, describeError, list, listAll, post, seg } from '../api';
import { confirmDialog } from '../dialog';
import { field, h, replace, type Child } from '../dom';
import { badge, time } from '../format';
import type { RouteContext } from '../router';
import { isTenantAdmin, type Session } from '../session';
import { errorBox, loading, successBox } from '../status';
import { pagedTable, type PagedTable } from '../table';
import type { Project, RoleBindingRecord, ServiceAccount, User } from '../types';

/** The roles a tenant binds (src/iam/iam.cpp), with what each allows in a few words. */
const ROLES: { role: string; project: boolean; allows: string }[] = [
  { role: 'tenant-admin', project: false, allows: 'everything in the tenant: projects, members, allocations, budgets' },
  { role: 'tenant-billing', project: false, allows: 'invoices, budgets and usage, read only' },
  { role: 'project-admin', project: true, allows: 'one project: its allocations and who works in it' },
  { role: 'project-member', project: true, allows: 'request and release allocations in one project' },
  { role: 'project-viewer', project: true, allows: 'see the allocations of one project' },
];

// Enough for any tenant's bindings.
const MAX_BINDINGS = 5000;

type Kind = RoleBindingRecord['subject_kind'];
const subjectKey = (kind: Kind, id: string): string => `${kind}:${id}`;

/** Where a binding came from. */
type Origin = { kind: 'provider'; provider: string } | { kind: 'api' } | { kind: 'unknown' };

function originOf(b: RoleBindingRecord): Origin {
  const provider = /^oidc:(.+)$/.exec(b.source)?.[1];
  return provider ? { kind: 'provider', provider } : b.source === 'api' ? { kind: 'api' } : { kind: 'unknown' };
}

export async function renderMembers(ctx: RouteContext, sess: Session): Promise<void> {
  ctx.main.append(h('h1', null, 'Members'));
  const tenant = sess.tenant;
  if (!tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so there are no members to show.'));
    return;
  }
  ctx.main.append(h('p', { class: 'lead' },
    `The users and service accounts of ${tenant.name} and the roles bound to them. Roles your identity ` +
    "provider grants are set again at each login: change those in the provider's groups."));
  const base = `/v1/tenants/${seg(tenant.id)}`;
  const me = sess.principal.id;
  const canGrant = isTenantAdmin(sess.principal);

  const status = h('div', null, loading('the members'));
  ctx.main.append(status);
  let users: User[] = [];
  let accounts: ServiceAccount[] = [];
  let projects: Project[] = [];
  try {
    [users, accounts, projects] = await Promise.all([
      listAll<User>(`${base}/users`), listAll<ServiceAccount>(`${base}/service-accounts`),
      listAll<Project>(`${base}/projects`)]);
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(status, errorBox(`Could not load the members: ${describeError(err)}`));
    return;
  }
  if (ctx.signal.aborted) return;
  const projectNames = new Map(projects.map((p) => [p.id, p.name]));
  const projectName = (id: string): string => projectNames.get(id) ?? id;
  const names = new Map<string, string>([
    ...users.map((u): [string, string] => [subjectKey('user', u.id), u.username]),
    ...accounts.map((a): [string, string] => [subjectKey('service_account', a.id), a.name]),
  ]);
  const nameOf = (kind: Kind, id: string): string => names.get(subjectKey(kind, id)) ?? id;
  const scopeText = (b: RoleBindingRecord): string =>
    b.project_id ? `in project ${projectName(b.project_id)}` : 'in the whole tenant';

  // ---- the bindings, by subject ----
  let bySubject = new Map<string, RoleBindingRecord[]>();
  const loadAccess = async (): Promise<void> => {
    const bindings = await listAll<RoleBindingRecord>(`${base}/role-bindings`, MAX_BINDINGS);
    bySubject = new Map();
    for (const b of bindings) {
      const key = subjectKey(b.subject_kind, b.subject_id);
      bySubject.set(key, [...(bySubject.get(key) ?? []), b]);
    }
  };
  try {
    await loadAccess();
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(status, errorBox(`Could not load the role bindings: ${describeError(err)}`));
    return;
  }
  if (ctx.signal.aborted) return;
  status.replaceChildren();

  const result = h('div', { class: 'result-slot' });
  let tables: PagedTable[] = [];
  /** After a grant or revoke: the bindings again, the tables redrawn, focus kept at `focusTo`. */
  const refresh = async (focusTo: HTMLElement | null): Promise<void> => {
    try {
      await loadAccess();
    } catch (err) {
      replace(result, errorBox(`Could not reload the role bindings: ${describeError(err)}`));
      return;
    }
    await Promise.all(tables.map((t) => t.refresh()));
    focusTo?.focus();
  };

  function originView(origin: Origin): Child {
    switch (origin.kind) {
      case 'provider':
        return [h('code', null, `oidc:${origin.provider}`), ' synced from identity provider ', origin.provider,
                ' at each login. Revoking it here would last only until their next login.'];
      case 'api':
        return 'Granted through the API or the console.';
      default:
        return 'Origin not recorded.';
    }
  }

  function revokeButton(b: RoleBindingRecord, subject: string, origin: Origin): HTMLElement | null {
    // The provider's roles come back at the next login: revoking them here would only mislead.
    if (!canGrant || origin.kind === 'provider') return null;
    const button = h('button', { type: 'button', class: 'danger',
                                 'aria-label': `Revoke ${b.role} from ${subject}` }, 'Revoke');
    button.addEventListener('click', () => confirmDialog({
      title: `Revoke ${b.role} from ${subject}?`,
      description: `${b.subject_id === me ? 'You lose' : `${subject} loses`} the role ${scopeText(b)} ` +
                   'at once, in every session and API key.',
      body: [
        h('p', null, `${b.role} allows ${ROLES.find((r) => r.role === b.role)?.allows ?? 'what the role grants'}.`),
        b.subject_id === me
          ? h('div', { class: 'notice warning' }, h('p', null, 'This is your own role. Without it you may not be able to ' +
                                                                'manage members any more.'))
          : null,
        h('p', { class: 'small' }, originView(origin)),
      ],
      confirmLabel: `Revoke ${b.role}`,
      cancelled: 'Nothing revoked.',
      failure: `Could not revoke ${b.role} from ${subject}`,
      trigger: button,
      testId: 'revoke-dialog',
      run: () => del(`${base}/role-bindings/${seg(b.id)}`),
      done: () => {
        replace(result, successBox(`Revoked ${b.role} ${scopeText(b)} from ${subject}.`));
        // The row's buttons are redrawn: keep the keyboard at the list it was in.
        const list = button.closest('section');
        void refresh(list?.querySelector<HTMLElement>('h2') ?? null);
      },
    }));
    return button;
  }

  function rolesCell(kind: Kind, id: string): HTMLElement {
    const mine = bySubject.get(subjectKey(kind, id)) ?? [];
    if (mine.length === 0) return h('span', { class: 'small' }, 'no roles');
    const subject = nameOf(kind, id);
    return h('ul', { class: 'plain bindings' }, mine.map((b) => {
      const origin = originOf(b);
      return h('li', { 'data-binding': b.id, 'data-role': b.role },
        h('div', { class: 'binding-head' }, h('strong', null, b.role), ` ${scopeText(b)} `,
          revokeButton(b, subject, origin)),
        h('div', { class: 'small origin' }, originView(origin)));
    }));
  }

  const usersTable = pagedTable<User>({
    caption: 'Users',
    empty: 'No users yet.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (u) => u.id,
    fetchPage: (after, limit) => list<User>(`${base}/users`, after, limit),
    columns: [
      { header: 'User', rowHeader: true, cell: (u) => [h('span', { class: 'name' }, u.username), u.id === me ? ' (you)' : '',
          u.display_name && u.display_name !== u.username ? h('div', { class: 'small' }, u.display_name) : null,
          u.email ? h('div', { class: 'small' }, u.email) : null] },
      { header: 'State', cell: (u) => badge(u.state) },
      { header: 'Roles and where they came from', cell: (u) => rolesCell('user', u.id) },
      { header: 'Created', cell: (u) => time(u.created_at) },
    ],
  });
  const accountsTable = pagedTable<ServiceAccount>({
    caption: 'Service accounts',
    empty: 'No service accounts. Automation can use one with its own API key instead of a person’s.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (a) => a.id,
    fetchPage: (after, limit) => list<ServiceAccount>(`${base}/service-accounts`, after, limit),
    columns: [
      { header: 'Service account', rowHeader: true, cell: (a) => [h('span', { class: 'name' }, a.name),
          a.description ? h('div', { class: 'small' }, a.description) : null] },
      { header: 'State', cell: (a) => badge(a.state) },
      { header: 'Roles and where they came from', cell: (a) => rolesCell('service_account', a.id) },
      { header: 'Created', cell: (a) => time(a.created_at) },
    ],
  });
  tables = [usersTable, accountsTable];

  // ---- granting a role (tenant admins) ----
  function grantForm(): HTMLElement {
    const subject = h('select', { name: 'subject', required: true },
      h('option', { value: '' }, 'Choose a user or service account'),
      h('optgroup', { label: 'Users' }, users.filter((u) => u.state === 'active').map((u) =>
        h('option', { value: subjectKey('user', u.id) }, u.display_name && u.display_name !== u.username
          ? `${u.username} (${u.display_name})` : u.username))),
      accounts.length ? h('optgroup', { label: 'Service accounts' }, accounts.map((a) =>
        h('option', { value: subjectKey('service_account', a.id) }, a.name))) : null);
    const role = h('select', { name: 'role', required: true },
      ROLES.map((r) => h('option', { value: r.role }, `${r.role}: ${r.allows}`)));
    const project = h('select', { name: 'project' },
      h('option', { value: '' }, projects.length ? 'Choose a project' : 'No projects yet'),
      projects.map((p) => h('option', { value: p.id }, p.name)));
    const submit = h('button', { type: 'submit' }, 'Grant role');
    const answer = h('div', { class: 'result-slot' });
    const projectRole = (): boolean => ROLES.find((r) => r.role === role.value)?.project ?? false;
    // The project matters only for project roles; disabled, it is skipped by the keyboard too.
    const syncProject = (): void => {
      project.disabled = !projectRole();
      if (project.disabled) project.value = '';
    };
    role.addEventListener('change', syncProject);
    syncProject();
    const form = h('form', { class: 'inline-form', 'aria-labelledby': 'grant-heading', novalidate: true },
      h('h2', { id: 'grant-heading' }, 'Grant a role'),
      field('To', subject),
      field('Role', role),
      field('Project', project, 'For project roles only: the project the role applies to.'),
      submit, answer);

    const invalid = (control: HTMLSelectElement, message: string): void => {
      control.setAttribute('aria-invalid', 'true');
      replace(answer, errorBox(message));
      control.focus();
    };
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      replace(answer);
      subject.removeAttribute('aria-invalid');
      project.removeAttribute('aria-invalid');
      const [kind, id] = subject.value.split(/:(.*)/) as [Kind, string];
      if (!subject.value) return invalid(subject, 'Choose who gets the role.');
      if (projectRole() && !project.value)
        return invalid(project, projects.length ? `${role.value} applies to one project: choose it.`
                                                : `${role.value} applies to one project: create a project first.`);
      const name = nameOf(kind, id);
      const body: Record<string, string> = { role: role.value, subject_kind: kind, subject_id: id };
      if (project.value) body.project = project.value;
      submit.disabled = true;
      void (async () => {
        try {
          const b = await post<RoleBindingRecord>(`${base}/role-bindings`, body);
          replace(answer, successBox(`Granted ${b.role} ${scopeText(b)} to ${name}.`));
          await refresh(null);
        } catch (err) {
          replace(answer, errorBox(`Could not grant ${role.value} to ${name}: ${describeError(err)}`));
          submit.focus();
        } finally {
          submit.disabled = false;
        }
      })();
    });
    return form;
  }

  if (canGrant) ctx.main.append(grantForm());
  ctx.main.append(result, usersTable.element, accountsTable.element);
  await Promise.all(tables.map((t) => t.reload()));
}
