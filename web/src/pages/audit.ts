// The audit trail (platform admins and auditors): the chain's verification, then the records,
// newest pages by cursor, filterable by actor, action and outcome.
import { describeError, get, list } from '../api';
import { field, h, replace } from '../dom';
import { badge, time } from '../format';
import type { RouteContext } from '../router';
import { errorBox, loading } from '../status';
import { pagedTable } from '../table';
import type { AuditRecord, AuditVerification } from '../types';

function verification(v: AuditVerification): HTMLElement {
  return h('div', { class: `notice ${v.ok ? 'success' : 'error'}`, role: v.ok ? null : 'alert',
                    'data-testid': 'audit-verify', 'data-ok': String(v.ok) },
    h('p', null, h('strong', null, v.ok ? 'Verified: the chain is intact.' : 'Verification FAILED.'),
      ` ${v.records_checked} records and ${v.checkpoints_checked} signed checkpoints checked; last record ${v.last_seq}.`),
    v.ok ? null : h('p', null, `First bad record: ${v.first_bad_seq ?? 'unknown'}. ${v.reason}`),
    h('p', { class: 'small' }, 'Head hash ', h('code', { class: 'mono' }, v.head_hash || '—'),
      ' — keep it elsewhere to detect records removed after the last checkpoint.'));
}

export async function renderAudit(ctx: RouteContext): Promise<void> {
  const verifySlot = h('section', { 'aria-labelledby': 'verify-heading' },
    h('h2', { id: 'verify-heading' }, 'Verification'), loading('the verification'));
  const actor = h('input', { name: 'actor', value: ctx.query.get('actor') ?? '', autocomplete: 'off' });
  const action = h('input', { name: 'action', value: ctx.query.get('action') ?? '', autocomplete: 'off' });
  const outcome = h('select', { name: 'outcome' },
    ['', 'success', 'failure', 'denied', 'throttled'].map((o) =>
      h('option', { value: o, selected: (ctx.query.get('outcome') ?? '') === o }, o || 'any')));
  const filters = h('form', { class: 'filters', 'aria-label': 'Filter the audit trail' },
    field('Actor (user or key id)', actor), field('Action', action, 'For example tenant.create'),
    field('Outcome', outcome), h('button', { type: 'submit' }, 'Apply filters'));
  ctx.main.append(h('h1', null, 'Audit trail'),
    h('p', { class: 'lead' }, 'Every change and every denial, hash-chained and signed.'),
    verifySlot, filters);

  const table = pagedTable<AuditRecord>({
    caption: 'Records',
    empty: 'No records match.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (r) => String(r.seq),
    fetchPage: (after, limit) => list<AuditRecord>('/v1/audit', after, limit,
      { actor: actor.value.trim(), action: action.value.trim(), outcome: outcome.value }),
    columns: [
      { header: 'Seq', rowHeader: true, className: 'num', cell: (r) => String(r.seq) },
      { header: 'Time', cell: (r) => time(r.time) },
      { header: 'Actor', cell: (r) => h('span', { class: 'mono' }, r.actor || '—') },
      { header: 'Tenant', cell: (r) => r.tenant_id ? h('span', { class: 'mono' }, r.tenant_id) : '—' },
      { header: 'Action', cell: (r) => r.action },
      { header: 'Resource', cell: (r) => h('span', { class: 'mono small' }, r.resource) },
      { header: 'Outcome', cell: (r) => badge(r.outcome) },
      { header: 'Source', cell: (r) => r.source },
    ],
  });
  ctx.main.append(table.element);
  filters.addEventListener('submit', (e) => {
    e.preventDefault();
    void table.reload();
  });

  const verify = get<AuditVerification>('/v1/audit/verify', undefined, { signal: ctx.signal })
    .then((v) => {
      if (!ctx.signal.aborted) replace(verifySlot, h('h2', { id: 'verify-heading' }, 'Verification'), verification(v));
    })
    .catch((err: unknown) => {
      if (!ctx.signal.aborted)
        replace(verifySlot, h('h2', { id: 'verify-heading' }, 'Verification'),
                errorBox(`Could not verify the trail: ${describeError(err)}`));
    });
  await Promise.all([verify, table.reload()]);
}
