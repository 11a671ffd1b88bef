// A tenant's budgets: for the whole tenant and per project, each month's limit, the spend so far
// against it, its alert thresholds and hard stop; the alerts that fired. Tenant admins set, change
// and delete budgets (quota.write); billing readers see them. Rules: docs/billing.md "Budgets".
import { del, describeError, list, listAll, request, seg } from '../api';
import { confirmDialog } from '../dialog';
import { field, h, replace, uid } from '../dom';
import { badge, time } from '../format';
import { microsToDecimal, money, parseUnitsToMicros, percentOfBps } from '../money';
import type { RouteContext } from '../router';
import { isTenantAdmin, type Session } from '../session';
import { announce, errorBox, successBox } from '../status';
import { pagedTable } from '../table';
import type { Budget, BudgetAlert, Project } from '../types';

/** The path segment of the tenant-wide budget; projects are named by id. */
const WHOLE_TENANT = '-';
const DEFAULT_THRESHOLDS = '50, 80, 100';
const MAX_THRESHOLDS = 16;

/** "2500" or "12.5" for the amount field: the exact units, without trailing zeros. */
function unitsText(micros: number): string {
  return microsToDecimal(micros).replace(/\.?0+$/, '');
}

/** "50, 80, 100" as basis points, or the reason it is not a valid list (the server's rules). */
function parseThresholds(text: string): number[] | string {
  const parts = text.split(/[\s,;%]+/).filter(Boolean);
  if (parts.length > MAX_THRESHOLDS) return `At most ${MAX_THRESHOLDS} thresholds.`;
  const bps: number[] = [];
  for (const part of parts) {
    const m = /^(\d{1,5})(?:\.(\d{1,2}))?$/.exec(part);
    const value = m ? Number(m[1]) * 100 + Number((m[2] ?? '').padEnd(2, '0')) : NaN;
    if (!(value >= 1 && value <= 1_000_000))
      return `“${part}” is not a percentage between 0.01 and 10000 with at most two decimals.`;
    if (bps.length && value <= (bps[bps.length - 1] ?? 0)) return 'Thresholds must go up: each larger than the one before.';
    bps.push(value);
  }
  return bps;
}

function thresholdsText(bps: number[]): string {
  return bps.map((t) => String(t / 100)).join(', ');
}

export async function renderBudgets(ctx: RouteContext, sess: Session): Promise<void> {
  ctx.main.append(h('h1', null, 'Budgets'));
  const tenant = sess.tenant;
  if (!tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so there are no budgets to show.'));
    return;
  }
  ctx.main.append(h('p', { class: 'lead' },
    'A spending limit for each UTC month, for the whole tenant or for one project. Spend is the month’s invoice ' +
    'subtotal so far (before SLA credits, tax and prepaid credit). Each threshold fires one alert a month; a ' +
    'hard stop refuses new allocations once the budget is spent.'));
  const base = `/v1/tenants/${seg(tenant.id)}`;
  const canWrite = isTenantAdmin(sess.principal);

  let projects: Project[] = [];
  try {
    projects = await listAll<Project>(`${base}/projects`);
  } catch (err) {
    if (ctx.signal.aborted) return;
    ctx.main.append(errorBox(`Could not load the projects: ${describeError(err)}`));
  }
  if (ctx.signal.aborted) return;
  const projectName = new Map(projects.map((p) => [p.id, p.name]));
  const scopeName = (projectId: string | null): string =>
    projectId === null ? 'the whole tenant' : `project ${projectName.get(projectId) ?? projectId}`;
  // The rate card's currency, learnt from the first budget that was priced this month.
  let currency: string | null = null;

  const result = h('div', { class: 'result-slot' });
  const budgets = pagedTable<Budget>({
    caption: 'Budgets this month',
    empty: canWrite ? 'No budgets yet. Set one below.' : 'No budgets yet.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (b) => b.project_id ?? WHOLE_TENANT,
    fetchPage: async (after, limit) => {
      const page = await list<Budget>(`${base}/budgets`, after, limit);
      currency ??= page.items.find((b) => b.currency)?.currency ?? null;
      return page;
    },
    columns: [
      { header: 'Scope', rowHeader: true, cell: (b) => b.project_id === null ? 'Whole tenant'
          : h('span', null, 'Project ', h('span', { class: 'name' }, projectName.get(b.project_id) ?? b.project_id)) },
      { header: 'Limit a month', className: 'num', cell: (b) => money(b.amount_micros, b.currency) },
      { header: 'Spent so far', cell: spendCell },
      { header: 'Alert thresholds', cell: (b) => b.thresholds_bps.length === 0 ? 'none' :
          h('ul', { class: 'plain' }, b.thresholds_bps.map((t) => h('li', null, percentOfBps(t),
            (b.spent_bps ?? 0) >= t ? [' ', badge('reached', 'warn')] : null))) },
      { header: 'Hard stop', cell: (b) => b.hard_stop ? 'yes: new allocations refused once spent' : 'no' },
      { header: 'Changed', cell: (b) => time(b.updated_at) },
      ...(canWrite ? [{ header: 'Actions', cell: (b: Budget) => actions(b) }] : []),
    ],
  });

  function spendCell(b: Budget): HTMLElement {
    if (b.spend_micros === null)
      return h('span', { class: 'reason' }, `Not rated: ${b.spend_error ?? 'the spend could not be priced'}`);
    const share = b.percent ?? 0;
    const label = uid('spend');
    return h('div', { class: 'spend' },
      h('progress', { max: 100, value: Math.min(share, 100), 'aria-labelledby': label },
        `${percentOfBps(b.spent_bps ?? 0)}`),
      h('span', { id: label },
        `${money(b.spend_micros, b.currency)} of ${money(b.amount_micros, b.currency)} (${percentOfBps(b.spent_bps ?? 0)})`,
        b.period ? ` in ${b.period}` : ''),
      share >= 100 ? [' ', badge(b.hard_stop ? 'spent: hard stop' : 'over budget', 'bad')] : null,
      b.currency ? null : h('span', { class: 'reason' }, 'Nothing priced this month yet.'));
  }

  const alerts = pagedTable<BudgetAlert>({
    caption: 'Alerts fired, oldest first',
    empty: 'No budget has reached a threshold yet.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (a) => a.id,
    fetchPage: (after, limit) => list<BudgetAlert>(`${base}/budget-alerts`, after, limit),
    columns: [
      { header: 'Fired', rowHeader: true, cell: (a) => time(a.created_at) },
      { header: 'Scope', cell: (a) => a.project_id === null ? 'Whole tenant' : `Project ${projectName.get(a.project_id) ?? a.project_id}` },
      { header: 'Month', cell: (a) => a.period },
      { header: 'Threshold', className: 'num', cell: (a) => `${percentOfBps(a.threshold_bps)} (${money(a.threshold_micros, currency)})` },
      { header: 'Spend when fired', className: 'num', cell: (a) => money(a.spend_micros, currency) },
      { header: 'Limit', className: 'num', cell: (a) => money(a.amount_micros, currency) },
    ],
  });

  // ---- setting, changing and deleting (tenant admins) ----
  const scope = h('select', { name: 'scope' },
    h('option', { value: WHOLE_TENANT }, 'Whole tenant'),
    projects.map((p) => h('option', { value: p.id }, `Project ${p.name}`)));
  const amount = h('input', { name: 'amount', required: true, inputmode: 'decimal', autocomplete: 'off',
                              pattern: '[0-9]{1,10}([.][0-9]{1,6})?' });
  const thresholds = h('input', { name: 'thresholds', value: DEFAULT_THRESHOLDS, autocomplete: 'off' });
  const hardStop = h('input', { name: 'hard_stop', type: 'checkbox', id: uid('field') });
  const save = h('button', { type: 'submit' }, 'Save budget');
  const formResult = h('div', { class: 'result-slot' });
  const form = h('form', { class: 'inline-form', 'aria-labelledby': 'budget-form-heading', novalidate: true },
    h('h2', { id: 'budget-form-heading' }, 'Set a budget'),
    h('p', { class: 'hint' }, 'Setting a budget where one exists replaces it. Thresholds the spend has already reached fire at once.'),
    field('For', scope),
    field('Limit a month', amount, 'In your rate card’s currency, for example 2500 or 2500.50.'),
    field('Alert thresholds (%)', thresholds, 'Percentages of the limit, ascending, for example 50, 80, 100; empty for no alerts.'),
    h('div', { class: 'field check' }, hardStop,
      h('label', { for: hardStop.id }, 'Hard stop: refuse new allocations once the budget is spent')),
    save, formResult);

  function invalid(input: HTMLInputElement, message: string): void {
    input.setAttribute('aria-invalid', 'true');
    replace(formResult, errorBox(message));
    input.focus();
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    replace(formResult);
    amount.removeAttribute('aria-invalid');
    thresholds.removeAttribute('aria-invalid');
    const micros = parseUnitsToMicros(amount.value);
    if (micros === null)
      return invalid(amount, 'The limit must be an amount above 0 with at most six decimals, for example 2500.50.');
    const bps = parseThresholds(thresholds.value);
    if (typeof bps === 'string') return invalid(thresholds, bps);
    const where = scope.value;
    const named = where === WHOLE_TENANT ? 'the whole tenant' : scopeName(where);
    save.disabled = true;
    void (async () => {
      try {
        const saved = await request<Budget>('PUT', `${base}/budgets/${seg(where)}`,
          { amount_micros: micros, thresholds_bps: bps, hard_stop: hardStop.checked });
        replace(formResult, successBox(`Budget for ${named} saved: ${money(saved.amount_micros, saved.currency)} a month.`));
        await Promise.all([budgets.reload(), alerts.reload()]);
      } catch (err) {
        replace(formResult, errorBox(`Could not save the budget for ${named}: ${describeError(err)}`));
        amount.focus();
      } finally {
        save.disabled = false;
      }
    })();
  });

  function actions(b: Budget): HTMLElement {
    const key = b.project_id ?? WHOLE_TENANT;
    const named = scopeName(b.project_id);
    const edit = h('button', { type: 'button', class: 'secondary', 'aria-label': `Change the budget of ${named}` }, 'Change');
    edit.addEventListener('click', () => {
      scope.value = key;
      amount.value = unitsText(b.amount_micros);
      thresholds.value = thresholdsText(b.thresholds_bps);
      hardStop.checked = b.hard_stop;
      replace(formResult);
      form.scrollIntoView({ block: 'nearest' });
      amount.focus();
      announce(`The form holds the budget of ${named}. Change it and save.`);
    });
    const remove = h('button', { type: 'button', class: 'danger', 'aria-label': `Delete the budget of ${named}` }, 'Delete');
    remove.addEventListener('click', () => confirmDialog({
      title: `Delete the budget of ${named}?`,
      description: `Nothing will warn about or stop the spending of ${named} any more. The alerts it fired stay listed.`,
      confirmLabel: 'Delete budget',
      cancelled: 'Nothing deleted.',
      failure: `Could not delete the budget of ${named}`,
      trigger: remove,
      testId: 'delete-budget-dialog',
      run: () => del(`${base}/budgets/${seg(key)}`),
      done: () => {
        const notice = successBox(`The budget of ${named} is deleted.`);
        replace(result, notice);
        // The row and its buttons are gone: keep the keyboard at the list.
        void budgets.reload().then(() => budgets.element.querySelector<HTMLElement>('h2')?.focus());
      },
    }));
    return h('div', { class: 'row-actions' }, edit, remove);
  }

  ctx.main.append(result, budgets.element);
  if (canWrite) ctx.main.append(form);
  ctx.main.append(alerts.element);
  // The alerts' amounts are shown in the currency the budgets name.
  await budgets.reload();
  await alerts.reload();
}
