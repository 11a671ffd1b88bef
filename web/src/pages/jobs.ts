// A tenant's jobs (docs/jobs.md): the list, with each job's state and why it waits or how it
// ended; and a job's page with its members, its history, its allocation while it waits and the
// last lines of its output, followed while the job is live. Cancel asks first. Operators pick the
// tenant (from this page or from Tenants).
import { describeError, get, list, listAll, post, seg } from '../api';
import { confirmDialog } from '../dialog';
import { field, h, replace, scrollBox, type Child } from '../dom';
import { badge, time } from '../format';
import { href, navigate, type RouteContext } from '../router';
import { isPlatform, isTenantAdmin, normalizeRole, type Session } from '../session';
import { announce, errorBox, loading, successBox } from '../status';
import { visibleProjects } from '../projects';
import { pagedTable } from '../table';
import { chart, formatNumber, MAX_SERIES } from '../chart';
import type { Job, JobAttempt, JobDetail, JobEvent, JobLogs, JobMember, JobUtilization, Project, Tenant } from '../types';

const STATES = ['', 'queued', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'preempted'];
/** How often a live job's page asks again. */
const FOLLOW_MS = 5_000;
/** The lines of each member's output a job's page shows. */
const LOG_LINES = 200;

// The scheduler's reason codes for a pending allocation, in words (pages/queue.ts says more).
const WAITS: Record<string, string> = {
  quota_exceeded: 'over quota',
  insufficient_capacity: 'no free GPUs fit it',
};

const FAILURES: Record<string, string> = {
  exit_code: 'exited with an error',
  oom: 'ran out of memory',
  node_lost: 'its node was lost',
  image_pull: 'its image could not be pulled',
  deadline: 'ran past its maximum duration',
  start_failed: 'could not start',
};

/** A job's page: /jobs/{tenant}/{project}/{job}. */
function jobPath(j: Pick<Job, 'tenant_id' | 'project_id' | 'id'>): string {
  return `/jobs/${encodeURIComponent(j.tenant_id)}/${encodeURIComponent(j.project_id)}/${encodeURIComponent(j.id)}`;
}

/** The list of a tenant's jobs; operators name the tenant. */
export function jobsPath(tenantId: string | null): string {
  return tenantId ? `/jobs?tenant=${encodeURIComponent(tenantId)}` : '/jobs';
}

function finished(state: string): boolean {
  return state === 'succeeded' || state === 'failed' || state === 'cancelled' || state === 'preempted';
}

function stateBadge(state: string): HTMLElement {
  const tone = state === 'running' || state === 'succeeded' ? 'ok'
    : state === 'failed' ? 'bad'
    : state === 'cancelled' ? 'neutral' : 'warn';
  return badge(state, tone);
}

function memberBadge(m: JobMember): HTMLElement {
  const tone = m.state === 'running' || (m.state === 'exited' && m.exit_code === 0) ? 'ok'
    : m.state === 'failed' || m.state === 'exited' ? 'bad' : 'warn';
  return badge(m.state, tone);
}

function failureText(failure: string | null): string {
  return failure ? FAILURES[failure] ?? failure.replace(/_/g, ' ') : '—';
}

/** Why a job waits or how it ended: a few words, and the control plane's reason below them. */
function outcome(j: Job): Child {
  const reason = j.reason ? h('span', { class: 'reason' }, j.reason) : null;
  if (j.state === 'succeeded') return `exit code ${j.exit_code ?? 0}`;
  if (j.state === 'failed') {
    const code = j.exit_code !== null && j.failure !== 'oom' ? ` (exit code ${j.exit_code})` : '';
    return [`${failureText(j.failure)}${code}`, reason];
  }
  return j.reason || '—';
}

function offeringText(j: Job): string {
  return `${j.spec.count} × ${j.spec.offering}${j.spec.gang > 1 ? `, gang of ${j.spec.gang}` : ''}`;
}

/** A command line as a shell would read it back: words with spaces or quotes are quoted. */
function commandLine(words: string[]): string {
  return words.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/** allocation.write on the job's project: what cancelling takes (the server decides). */
function canCancel(sess: Session, tenantId: string, projectId: string): boolean {
  return sess.principal.role_bindings.some((b) => {
    const role = normalizeRole(b.role);
    if (b.tenant_id === null) return role === 'platform-admin';
    if (b.tenant_id !== tenantId) return false;
    if (b.project_id === null) return role === 'tenant-admin';
    return b.project_id === projectId && (role === 'project-admin' || role === 'project-member');
  });
}

// ---- the list ---------------------------------------------------------------------------------

export async function renderJobs(ctx: RouteContext, sess: Session): Promise<void> {
  const operator = isPlatform(sess.principal);
  ctx.main.append(h('h1', null, 'Jobs'));
  if (!operator && !sess.tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so you have no jobs here.'));
    return;
  }
  ctx.main.append(h('p', { class: 'lead' }, operator
    ? "A tenant's jobs: containers run on the GPUs of their allocations. Pick the tenant below."
    : "Your tenant's jobs: containers run on the GPUs of their allocations. Submit them through the API or the CLI."));

  // Operators choose among every tenant; the others see their own.
  let tenants: Tenant[] = [];
  if (operator) {
    try {
      tenants = await listAll<Tenant>('/v1/tenants', 10000);
    } catch (err) {
      if (!ctx.signal.aborted) ctx.main.append(errorBox(`Could not list the tenants: ${describeError(err)}`));
      return;
    }
    if (ctx.signal.aborted) return;
  }
  const wanted = ctx.query.get('tenant');
  const picked = operator
    ? tenants.find((t) => t.id === wanted || t.name === wanted) ?? tenants.find((t) => t.id === sess.tenant?.id) ?? tenants[0]
    : sess.tenant;
  if (!picked) {
    ctx.main.append(h('p', { class: 'empty' }, 'No tenants yet.'));
    return;
  }
  const tenantId = picked.id;
  const tenantPath = `/v1/tenants/${seg(tenantId)}`;

  // Who holds roles in single projects lists those projects' jobs, one project at a time.
  const wholeTenant = operator || isTenantAdmin(sess.principal);
  const projects = await visibleProjects(ctx, sess, tenantPath, wholeTenant);
  if (!projects) return;
  if (!wholeTenant && projects.length === 0) {
    ctx.main.append(h('p', { class: 'empty' }, 'You hold no role in a project, so there are no jobs to show.'));
    return;
  }
  const projectName = new Map(projects.map((p) => [p.id, p.name]));

  const tenantFilter = operator
    ? h('select', { name: 'tenant' }, tenants.map((t) => h('option', { value: t.id, selected: t.id === tenantId }, t.name)))
    : null;
  const projectFilter = h('select', { name: 'project' },
    wholeTenant ? h('option', { value: '' }, 'All projects') : null,
    projects.map((p) => h('option', { value: p.id, selected: p.id === ctx.query.get('project') }, p.name)));
  const stateFilter = h('select', { name: 'state' },
    STATES.map((st) => h('option', { value: st, selected: (ctx.query.get('state') ?? '') === st }, st || 'any')));
  const filters = h('form', { class: 'filters', 'aria-label': 'Filter jobs' },
    tenantFilter ? field('Tenant', tenantFilter) : null,
    field('Project', projectFilter), field('State', stateFilter), h('button', { type: 'submit' }, 'Show'));

  const table = pagedTable<Job>({
    caption: `Jobs of ${picked.name}`,
    empty: 'No jobs match.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (j) => j.id,
    fetchPage: (after, limit) => {
      const path = projectFilter.value ? `${tenantPath}/projects/${seg(projectFilter.value)}/jobs` : `${tenantPath}/jobs`;
      return list<Job>(path, after, limit, { state: stateFilter.value });
    },
    columns: [
      { header: 'Name', rowHeader: true, cell: (j) => [h('a', { href: href(jobPath(j)), class: 'name' }, j.name),
                                                       h('div', { class: 'mono small' }, j.id)] },
      { header: 'Project', cell: (j) => projectName.get(j.project_id) ?? h('span', { class: 'mono' }, j.project_id) },
      { header: 'State', cell: (j) => [stateBadge(j.state),
                                       j.stop_requested_at && !finished(j.state) ? h('span', { class: 'reason' }, 'stopping') : null] },
      { header: 'Why / outcome', className: 'why', cell: outcome },
      { header: 'Attempts', className: 'num', cell: (j) => String(j.attempts) },
      { header: 'Created', cell: (j) => time(j.created_at) },
      { header: 'Offering', cell: offeringText },
    ],
  });
  filters.addEventListener('submit', (e) => {
    e.preventDefault();
    const tenantChanged = tenantFilter !== null && tenantFilter.value !== tenantId;
    const query = new URLSearchParams();
    if (tenantFilter) query.set('tenant', tenantFilter.value);
    // Another tenant has other projects: its page starts with all of them.
    if (projectFilter.value && !tenantChanged) query.set('project', projectFilter.value);
    if (stateFilter.value) query.set('state', stateFilter.value);
    const to = query.toString() ? `/jobs?${query.toString()}` : '/jobs';
    if (tenantChanged) {
      void navigate(to);
      return;
    }
    history.replaceState(null, '', href(to));
    void table.reload();
  });

  ctx.main.append(filters, table.element);
  await table.reload();
}

// ---- one job ----------------------------------------------------------------------------------

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}

function eventItem(e: JobEvent): HTMLElement {
  // The first event is the submission (no state before it).
  const change = !e.from || e.from === e.to
    ? ['submitted, ', stateBadge(e.to)]
    : [stateBadge(e.from), h('span', { 'aria-hidden': 'true' }, ' → '), h('span', { class: 'visually-hidden' }, ' to '),
       stateBadge(e.to)];
  return h('li', { 'data-seq': e.seq }, time(e.at), ' ', change, e.reason ? h('span', { class: 'reason' }, e.reason) : null);
}

function attemptsTable(attempts: JobAttempt[]): HTMLElement {
  return h('section', { 'aria-labelledby': 'attempts-heading' }, h('h2', { id: 'attempts-heading' }, 'Attempts'),
    scrollBox(h('table', { class: 'job-attempts', 'data-testid': 'job-attempts' },
      h('caption', { class: 'visually-hidden' }, 'Attempts'),
      h('thead', null, h('tr', null, ['Attempt', 'Nodes', 'Started', 'Ended', 'Why it ended']
        .map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, attempts.map((a) => h('tr', { 'data-attempt': a.attempt },
        h('th', { scope: 'row' }, String(a.attempt)),
        h('td', null, (a.node_names ?? a.nodes).join(', ') || '—'),
        h('td', null, time(a.started_at)),
        h('td', null, time(a.ended_at, 'running')),
        h('td', null, a.end_reason || '—')))))));
}

// The job's GPUs over time: one line per GPU or MIG instance (the first MAX_SERIES), from the
// samples their nodes reported since the job started.
function utilizationChart(u: JobUtilization | null): HTMLElement {
  if (!u) return h('div', { class: 'notice warning' }, h('p', null, 'The utilization could not be read.'));
  const gpus = u.gpus.filter((g) => g.points.length > 0).slice(0, MAX_SERIES);
  if (!u.from) return h('p', { class: 'empty' }, 'It has not started yet.');
  if (gpus.length === 0) return h('p', { class: 'empty' }, 'Its nodes have reported no samples yet.');
  const periods = [...new Set(gpus.flatMap((g) => g.points.map((p) => p.time)))].sort();
  return chart({
    title: 'GPU utilization',
    kind: 'lines',
    periods,
    granularity: 'point',
    series: gpus.map((g) => {
      const byTime = new Map(g.points.map((p) => [p.time, p.util_pct]));
      return {
        label: `${g.node} ${g.gpu}${g.instance ? ` (${g.instance})` : ''}`,
        values: periods.map((t) => byTime.get(t) ?? null),
      };
    }),
    format: (v) => `${formatNumber(v)} %`,
    tick: (v) => formatNumber(v),
    unit: '%',
    max: 100,
    note: 'The mean of the samples in each span, from the job\'s start to its end (or now).',
  });
}

function membersTable(members: JobMember[]): HTMLElement {
  return scrollBox(h('table', { class: 'job-members' },
    h('caption', { class: 'visually-hidden' }, 'Members'),
    h('thead', null, h('tr', null, ['Rank', 'Attempt', 'Node', 'State', 'Exit code', 'Out of memory', 'Why']
      .map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, members.map((m) => h('tr', { 'data-rank': m.rank },
      h('th', { scope: 'row' }, String(m.rank)),
      h('td', null, String(m.attempt)),
      h('td', null, m.node_id ? h('span', { class: 'mono' }, m.node_id) : '—'),
      h('td', null, memberBadge(m)),
      h('td', null, m.exit_code === null ? '—' : String(m.exit_code)),
      h('td', null, m.oom ? 'yes' : 'no'),
      h('td', null, m.failure ? failureText(m.failure) : '', m.error ? h('span', { class: 'reason' }, m.error) : null,
        !m.failure && !m.error ? '—' : null))))));
}

export async function renderJob(ctx: RouteContext, sess: Session): Promise<void> {
  const tenantId = ctx.params.tenant ?? '';
  const projectId = ctx.params.project ?? '';
  const id = ctx.params.job ?? '';
  const operator = isPlatform(sess.principal);
  const heading = h('h1', null, 'Job');
  const body = h('div', null, loading('the job'));
  ctx.main.append(h('p', { class: 'breadcrumb' }, h('a', { href: href(jobsPath(operator ? tenantId : null)) }, 'Jobs'), ' › '),
                  heading, body);

  const path = `/v1/tenants/${seg(tenantId)}/projects/${seg(projectId)}/jobs/${seg(id)}`;
  const projectName = get<Project>(`/v1/tenants/${seg(tenantId)}/projects/${seg(projectId)}`, undefined, { signal: ctx.signal })
    .then((p) => p.name, () => projectId);
  const tenantName = !operator ? Promise.resolve(sess.tenant?.name ?? tenantId)
    : get<Tenant>(`/v1/tenants/${seg(tenantId)}`, undefined, { signal: ctx.signal }).then((t) => t.name, () => tenantId);
  const readLogs = () => get<JobLogs>(`${path}/logs`, { tail: LOG_LINES }, { signal: ctx.signal });
  const readUtilization = () => get<JobUtilization>(`${path}/utilization`, undefined, { signal: ctx.signal })
    .catch(() => null);
  const utilizationSlot = h('div', { 'data-testid': 'job-utilization' });
  let job: JobDetail;
  let firstLogs: JobLogs | null;
  try {
    [job, firstLogs] = await Promise.all([get<JobDetail>(path, undefined, { signal: ctx.signal }),
                                          readLogs().catch(() => null)]);
  } catch (err) {
    if (ctx.signal.aborted) return;
    replace(body, errorBox(`Could not load job ${id}: ${describeError(err)}`));
    return;
  }
  const names = { project: await projectName, tenant: await tenantName };
  if (ctx.signal.aborted) return;
  heading.textContent = `Job ${job.name}`;
  document.title = `${heading.textContent} · gpuplane`;

  // ---- what is re-drawn as the job moves ----
  const factsSlot = h('div');
  const waitingSlot = h('div');
  const membersSlot = h('div');
  const attemptsSlot = h('div');
  const eventsSlot = h('div');
  const renderFacts = (): void => {
    const j = job;
    const spec = j.spec;
    const pairs: [string, Child][] = [
      ['State', h('span', { 'data-testid': 'job-state' }, stateBadge(j.state),
                  j.stop_requested_at && !finished(j.state) ? [' ', badge('stopping', 'warn')] : null)],
      ['Reason', h('span', { 'data-testid': 'job-reason' }, j.reason || '—')],
      ['Failure', failureText(j.failure)],
      ['Exit code', j.exit_code === null ? '—' : String(j.exit_code)],
      ['Attempts', String(j.attempts)],
      ...(operator ? [['Tenant', names.tenant] as [string, Child]] : []),
      ['Project', names.project],
      ['Image', h('span', null, h('code', null, spec.image), j.image_digest ? h('div', { class: 'mono small' }, j.image_digest) : null)],
      ['Command', spec.command.length || spec.args.length ? h('code', null, commandLine([...spec.command, ...spec.args]))
                                                          : "the image's own"],
      ['Offering', offeringText(j)],
      ['Restarts', spec.restart_policy === 'on-failure' ? `on failure, up to ${spec.retries} times` : 'never'],
      ['Volumes', spec.volumes.length ? spec.volumes.map((v) => `${v.kind}${v.read_only ? ' (read-only)' : ''}`).join(', ') : 'none'],
      ['Created', h('span', null, time(j.created_at), j.created_by ? h('span', { class: 'small' }, ` by ${j.created_by}`) : null)],
      ['Started', h('span', null, time(j.started_at, finished(j.state) ? 'never' : 'not yet'))],
      ['Ended', h('span', null, time(j.ended_at, finished(j.state) ? '—' : 'not yet'))],
      ['ID', h('span', { class: 'mono' }, j.id)],
      ['Allocation', h('span', null, h('span', { class: 'mono' }, j.allocation_id), j.allocation ? [' ', badge(j.allocation.state)] : null)],
    ];
    replace(factsSlot, h('dl', { class: 'facts' }, pairs.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])));
    // While it waits, what its allocation waits for (the scheduler's reason, kept up to date).
    const a = j.allocation;
    replace(waitingSlot, j.state === 'queued' && a
      ? h('div', { class: 'notice warning', 'data-testid': 'job-waiting' },
          h('p', null, h('strong', null, 'Waiting for GPUs', a.reason_code ? `: ${WAITS[a.reason_code] ?? a.reason_code.replace(/_/g, ' ')}` : '', '.'),
            ' Its allocation is ', badge(a.state), '.'),
          h('p', null, a.reason || 'The scheduler gave no reason.'))
      : null);
    replace(membersSlot, j.members.length
      ? membersTable(j.members)
      : h('p', { class: 'empty' }, finished(j.state) ? 'It ended before any member was placed.'
                                                     : 'None yet: they are placed with its allocation.'));
    // Placed again after a node was lost or drained: each attempt, where it ran and why it ended.
    replace(attemptsSlot, (j.attempt_history ?? []).length > 1 ? attemptsTable(j.attempt_history) : null);
    replace(eventsSlot, j.events.length
      ? h('ol', { class: 'timeline', 'data-testid': 'job-events' }, j.events.map(eventItem))
      : h('p', { class: 'empty' }, 'No events yet.'));
  };

  // ---- the output: one box per member, kept across refreshes; each stays at the end of its
  // output, as a terminal does, unless the reader has scrolled up ----
  const logsSlot = h('div', { class: 'job-logs', 'data-testid': 'job-logs' });
  const boxes = new Map<number, { note: HTMLElement; pre: HTMLPreElement; atEnd: boolean }>();
  let layout = '';
  const keepAtEnd = (): void => {
    for (const box of boxes.values()) if (box.atEnd) box.pre.scrollTop = box.pre.scrollHeight;
  };
  const renderLogs = (logs: JobLogs | null): void => {
    if (!logs) {
      layout = '';
      boxes.clear();
      replace(logsSlot, h('div', { class: 'notice warning' }, h('p', null, 'The output could not be read.')));
      return;
    }
    if (!logs.members.some((m) => m.text !== '' || m.dropped_before > 0)) {
      layout = '';
      boxes.clear();
      replace(logsSlot, h('p', { class: 'empty' }, logs.finished ? 'It wrote no output.' : 'No output yet.'));
      return;
    }
    const many = logs.members.length > 1;
    const key = logs.members.map((m) => m.rank).join(',');
    if (key !== layout) {
      layout = key;
      boxes.clear();
      replace(logsSlot, logs.members.map((m) => {
        const note = h('p', { class: 'hint', hidden: true });
        const pre = h('pre', { class: 'console-text', tabindex: 0,
                               'aria-label': many ? `Output of ${job.name}, rank ${m.rank}` : `Output of ${job.name}` });
        const box = { note, pre, atEnd: true };
        pre.addEventListener('scroll', () => {
          box.atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
        });
        boxes.set(m.rank, box);
        return [many ? h('h3', null, `Rank ${m.rank}`) : null, note, pre];
      }));
    }
    for (const m of logs.members) {
      const box = boxes.get(m.rank);
      if (!box) continue;
      box.note.hidden = m.dropped_before === 0;
      box.note.textContent = m.dropped_before > 0
        ? `Earlier output was dropped: the job keeps its last ${Math.round(logs.limit_bytes / 1024)} KiB.` : '';
      const text = m.text || '(no output yet)';
      if (box.pre.textContent !== text) box.pre.textContent = text;
    }
    keepAtEnd();
  };

  // ---- actions ----
  const result = h('div', { class: 'action-result' });
  const actionsSlot = h('div', { class: 'page-actions' });
  const mayCancel = canCancel(sess, tenantId, projectId);
  const renderActions = (): void => {
    if (finished(job.state) || job.stop_requested_at || !mayCancel) {
      replace(actionsSlot, job.stop_requested_at && !finished(job.state)
        ? h('p', { class: 'hint' }, 'Being stopped: it ends cancelled once its containers have stopped.') : null);
      return;
    }
    if (actionsSlot.querySelector('button')) return; // the same button, so focus stays on it
    const cancel = h('button', { type: 'button', class: 'danger' }, 'Cancel job');
    cancel.addEventListener('click', () => openCancel(cancel));
    replace(actionsSlot, cancel);
  };

  const followNote = h('p', { class: 'hint' });
  const apply = (next: JobDetail): void => {
    // An answer older than one already shown (a refresh that crossed a cancel) is dropped.
    if (next.version < job.version) return;
    const before = job.state;
    job = next;
    renderFacts();
    renderActions();
    if (finished(job.state)) replace(followNote, `The job has ended (${job.state}); this page no longer refreshes.`);
    if (before !== job.state) announce(`Job ${job.name} is now ${job.state}.`);
  };
  const refreshLogs = async (): Promise<void> => {
    const logs = await readLogs().catch(() => null);
    if (!ctx.signal.aborted) renderLogs(logs);
  };

  const openCancel = (trigger: HTMLButtonElement): void => {
    const queued = job.state === 'queued';
    confirmDialog<JobDetail>({
      title: `Cancel job ${job.name}?`,
      description: queued
        ? 'It has not started: it leaves the queue at once and its allocation is withdrawn. A cancelled job cannot be resumed.'
        : 'Its containers are stopped (SIGTERM, then SIGKILL after the grace period) and its GPUs are released; it ends ' +
          'cancelled once they have stopped. A cancelled job cannot be resumed.',
      confirmLabel: `Cancel job ${job.name}`,
      dismissLabel: 'Keep the job',
      cancelled: `Job ${job.name} is kept.`,
      failure: `Could not cancel job ${job.name}`,
      trigger,
      testId: 'cancel-job-dialog',
      run: () => post<JobDetail>(`${path}/cancel`, {}),
      done: (j) => {
        apply(j);
        const notice = successBox(j.state === 'cancelled'
          ? `Job ${j.name} cancelled.`
          : `Job ${j.name} is being stopped: it ends cancelled once its containers have stopped.`);
        notice.tabIndex = -1;
        replace(result, notice);
        notice.focus();
        void refreshLogs();
      },
    });
  };

  renderFacts();
  renderActions();
  renderLogs(firstLogs);
  void readUtilization().then((u) => { if (!ctx.signal.aborted) replace(utilizationSlot, utilizationChart(u)); });
  const section = (id: string, title: string, ...content: Child[]) =>
    h('section', { 'aria-labelledby': id }, h('h2', { id }, title), content);
  replace(body,
    waitingSlot,
    factsSlot,
    actionsSlot,
    result,
    section('members-heading', 'Members', membersSlot),
    attemptsSlot,
    section('events-heading', 'History', eventsSlot),
    section('utilization-heading', 'GPU utilization', utilizationSlot),
    section('output-heading', 'Output',
      h('p', { class: 'hint' }, `The last ${LOG_LINES} lines each member wrote (standard output and error together).`),
      logsSlot),
    followNote);
  keepAtEnd(); // the boxes were drawn before they were in the page

  // Followed while live: the job, its members and its output, every few seconds. Nothing of
  // this is announced but a change of state.
  const follow = async (): Promise<void> => {
    const refreshed = (): void => replace(followNote, `Refreshed every ${FOLLOW_MS / 1000} s while the job is live; ` +
                                          'last at ', time(new Date().toISOString()), '.');
    refreshed();
    while (!finished(job.state)) {
      await pause(FOLLOW_MS, ctx.signal);
      if (ctx.signal.aborted) return;
      try {
        const [next, logs] = await Promise.all([get<JobDetail>(path, undefined, { signal: ctx.signal }), readLogs()]);
        if (ctx.signal.aborted) return;
        apply(next);
        renderLogs(logs);
        if (!finished(job.state)) refreshed();
      } catch (err) {
        if (ctx.signal.aborted) return;
        replace(followNote, `Could not refresh: ${describeError(err)}. Trying again in ${FOLLOW_MS / 1000} s.`);
      }
    }
  };
  if (!finished(job.state)) void follow();
}
