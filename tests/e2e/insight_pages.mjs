// The queue, usage and SLA pages (called from console_test.mjs): for alice (acme, whose MIG
// allocation is placed by now), for bob (beta, whose page must name nothing of acme) and for the
// platform admin.
//
// The platform admin's API client seeds what the pages show:
//   - usage events from an external meter one and two days ago (egress in GiB), for acme's
//     project, for acme without a project and for beta: the charts' tables must show exactly
//     these quantities in the UTC days (and, for the admin over 12 months, the months) they fell in;
//   - an allocation over its project's quota (7 x 1g.5gb where the project's quota is one GPU),
//     which waits: the queue must say it is over the project quota, and name it for alice. It is
//     withdrawn after each look, so no later step sees a queue;
//   - for the admin, this month's invoice drafts (with the rate card the account pages publish,
//     or the same one here when they are skipped): the Invoiced chart must show acme's total.
// Each page is also looked at empty (bob's queue and SLA, the admin's SLA of last month). Over
// 30 days a chart's table is taller than its box, which then must be a tab stop to scroll it with
// the keyboard.

const HOUR = 3_600_000;
const OFFERING = 'a100-mig-1g';

/** RFC 3339 without milliseconds, as the API takes it. */
function rfc3339(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The start of the UTC day or month holding `ms`, as the page's table rows name it (data-period). */
function utcDay(ms) {
  const d = new Date(ms);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())).toISOString();
}

function utcMonth(ms) {
  const d = new Date(ms);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)).toISOString();
}

// The events each tenant step posted, by tenant name, for the admin's charts to show again.
const posted = new Map();

/** Usage events for the tenant: egress GiB one and two days ago (with and without a project). */
async function postEvents(admin, tenant, project) {
  const now = Date.now();
  const wanted = project
    ? [{ hoursAgo: 48, gib: 12.5, project }, { hoursAgo: 24, gib: 7.25, project: null }]
    : [{ hoursAgo: 24, gib: 3, project: null }];
  const events = wanted.map((e, i) => ({ ...e, tenant: tenant.name, ms: now - e.hoursAgo * HOUR,
                                         id: `e2e-${tenant.name}-egress-${i}` }));
  const answer = await admin('POST', '/v1/usage-events', events.map((e) => ({
    specversion: '1.0', id: e.id, source: '//e2e/egress-meter', type: 'dev.gpuplane.usage', time: rfc3339(e.ms),
    tenant: tenant.name, ...(e.project ? { project: e.project.name } : {}),
    data: { resource_key: 'egress/internet', quantity: e.gib, unit: 'GiB' },
  })), { expect: [202] });
  if (answer.accepted !== events.length) throw new Error(`usage events not accepted: ${JSON.stringify(answer.results)}`);
  posted.set(tenant.name, events);
  return events;
}

/** An allocation that waits: 7 x 1g.5gb is a whole GPU more than the project's quota of one. */
async function createWaiting(admin, tenant, project, check) {
  const a = await admin('POST', `/v1/tenants/${tenant.id}/projects/${project.id}/allocations`,
                        { offering: OFFERING, count: 7, name: 'e2e-over-quota' });
  check(a.state === 'pending' && a.reason_code === 'quota_exceeded',
        `the over-quota allocation is ${a.state} (${a.reason_code}: ${a.reason}), not pending over quota`);
  return a;
}

async function withdraw(admin, tenant, a) {
  const after = await admin('POST', `/v1/tenants/${tenant.id}/projects/${a.project_id}/allocations/${a.id}/release`,
                            { reason: 'e2e: the queue was looked at' });
  if (after.state !== 'released') throw new Error(`withdrawing ${a.id} left it ${after.state}`);
}

/** The text of a chart's table cell: the row of `period`, the column headed `column`. */
async function chartCell(figure, period, column) {
  return figure.evaluate((fig, { period, column }) => {
    const headers = [...fig.querySelectorAll('thead th')].map((th) => th.textContent.trim());
    const i = headers.indexOf(column);
    const row = fig.querySelector(`tbody tr[data-period="${period}"]`);
    if (i < 0 || !row) return `(no cell: columns ${headers.join(' | ')}; rows ${
      [...fig.querySelectorAll('tbody tr')].map((r) => r.dataset.period).join(' ')})`;
    return row.children[i]?.textContent.trim() ?? '';
  }, { period, column });
}

/** The chart captioned `title` with its table shown. */
async function openChart(page, title, timeout) {
  const figure = page.locator('figure.chart').filter({ has: page.locator('.chart-title', { hasText: title }) });
  await figure.waitFor({ timeout });
  const label = await figure.locator('svg[role="img"]').getAttribute('aria-label');
  if (!label?.startsWith(title)) throw new Error(`the chart "${title}" is described as: ${label}`);
  const toggle = figure.locator('button[aria-controls]');
  if (await toggle.textContent() !== 'Show as table') throw new Error(`the chart "${title}" has no "Show as table" button`);
  await toggle.click();
  if (await toggle.getAttribute('aria-expanded') !== 'true') throw new Error(`"Show as table" of "${title}" did not expand`);
  await figure.locator('table').waitFor({ timeout });
  return figure;
}

/** "12.5 GiB" -> 12.5 (the console's numbers are en-US in the test's browser). */
function quantity(text) {
  return Number(text.replace(/[^0-9.]/g, ''));
}

/** Sums of the events' GiB by (period start, column label). */
function expectedCells(events, periodOf, columnOf) {
  const cells = new Map();
  for (const e of events) {
    const key = `${periodOf(e.ms)}\u0000${columnOf(e)}`;
    cells.set(key, (cells.get(key) ?? 0) + e.gib);
  }
  return [...cells].map(([key, gib]) => ({ period: key.split('\u0000')[0], column: key.split('\u0000')[1], gib }));
}

async function checkEventTable(kit, figure, events, periodOf, columnOf, what) {
  for (const cell of expectedCells(events, periodOf, columnOf)) {
    const text = await chartCell(figure, cell.period, cell.column);
    kit.check(Math.abs(quantity(text) - cell.gib) < 1e-9,
              `${what}: ${cell.column} in the period from ${cell.period} reads "${text}", not ${cell.gib} GiB`);
  }
}

/** The CSV link downloads the same report as text/csv. */
async function checkCsv(kit, page, path, mustHave) {
  const link = page.getByRole('link', { name: 'Download CSV' });
  kit.check(await link.getAttribute('download') !== null, 'the CSV link is not a download');
  const url = await link.getAttribute('href');
  kit.check(url?.startsWith(`${path}?`) && url.includes('format=csv'), `the CSV link is ${url}`);
  const csv = await page.evaluate(async (u) => {
    const res = await fetch(u);
    return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
  }, url);
  kit.check(csv.status === 200 && csv.type.startsWith('text/csv') && csv.body.startsWith('kind,period_start,'),
            `the CSV link answers ${csv.status} ${csv.type}: ${csv.body.slice(0, 200)}`);
  for (const s of mustHave) kit.check(csv.body.includes(s), `the CSV download lacks "${s}"`);
}

export async function tenantInsightPages(kit, { page, admin, tenant, who }) {
  const { check, shot, nav, idle, timeout, setStep, log } = kit;
  const isAlice = who === 'alice';
  const shotName = (n, what) => `${isAlice ? n : n + 3}-${who}-${what}`;

  setStep(`${who}'s insight pages: seed usage events and a waiting allocation`);
  const project = (await admin('GET', `/v1/tenants/${tenant.id}/projects`)).items[0] ?? null;
  const events = await postEvents(admin, tenant, project);
  // Only acme has a project with quota: bob's queue stays empty.
  const waiting = project ? await createWaiting(admin, tenant, project, check) : null;

  setStep(`${who}: queue page`);
  await nav(page, 'Queue', 'Queue');
  await idle(page);
  if (waiting) {
    const row = page.locator(`tbody tr[data-key="${waiting.id}"]`);
    await row.waitFor({ timeout });
    const text = await row.textContent();
    check(text.includes('Over project quota') && text.includes('e2e-over-quota') && text.includes(project.name) &&
          /waits even when GPUs are free/.test(text), `${who}'s queue shows the waiting allocation as: ${text}`);
    check(await row.getByRole('link', { name: 'e2e-over-quota on the Allocations page' }).count() === 1,
          "the queue row does not link to the Allocations page");
  } else {
    await page.getByText('Nothing is waiting: all of your allocations have been placed.').waitFor({ timeout });
  }
  await shot(page, shotName(23, 'queue'));

  setStep(`${who}: usage page`);
  await nav(page, 'Usage', 'Usage');
  await idle(page);
  const egress = await openChart(page, 'Usage events in GiB, by project', timeout);
  await checkEventTable(kit, egress, events, utcDay, (e) => e.project?.name ?? 'No project', `${who}'s egress by day`);
  if (isAlice) await openChart(page, 'GPU-hours held, by project', timeout);
  else await page.getByText('No GPU time in this range').waitFor({ timeout });
  await checkCsv(kit, page, `/v1/tenants/${tenant.id}/usage`, ['GiB', String(events[0].gib)]);
  await shot(page, shotName(24, 'usage'));

  setStep(`${who}: SLA page`);
  await nav(page, 'SLA', 'SLA standing');
  await idle(page);
  if (isAlice) {
    const row = page.locator(`tbody tr[data-key^="${tenant.id}/"]`).filter({ hasText: OFFERING });
    await row.waitFor({ timeout });
    const text = await row.textContent();
    check(/100\.000000%/.test(text) && text.includes('meets target') && text.includes('no credit'),
          `alice's SLA row reads: ${text}`);
  } else {
    await page.getByText('No allocations with an SLA ran in this month.').waitFor({ timeout });
  }
  await shot(page, shotName(25, 'sla'));

  if (waiting) await withdraw(admin, tenant, waiting);
  log(`${who}: queue, usage and SLA pages checked`);
}

export async function operatorInsightPages(kit, { page, admin, tenants }) {
  const { check, shot, nav, idle, timeout, setStep, log } = kit;
  const { acme, beta } = tenants;
  const month = new Date().toISOString().slice(0, 7);

  setStep('admin insight pages: seed a waiting allocation and the month\'s invoices');
  const project = (await admin('GET', `/v1/tenants/${acme.id}/projects`)).items[0];
  const waiting = await createWaiting(admin, acme, project, check);
  // The account pages publish this card; it is published here too when they are left out.
  const card = await admin('GET', '/v1/rate-cards/default', undefined, { expect: [200, 404] });
  if (!card?.latest)
    await admin('POST', '/v1/rate-cards', { id: 'default', currency: 'USD', effective_from: '2020-01-01T00:00:00Z',
                                            prices: [{ offering: OFFERING, unit_price_micros: 3_600_000_000 },
                                                     // alice's job that ran (job_pages.mjs)
                                                     { offering: 'a100-pool', unit_price_micros: 3_600_000_000 }] });
  await admin('POST', '/v1/invoices/run', { period: month });
  const acmeInvoices = (await admin('GET', `/v1/invoices?period=${month}&tenant=${acme.id}`)).items
    .filter((i) => i.state !== 'void');
  check(acmeInvoices.length === 1 && acmeInvoices[0].total_micros > 0,
        `acme's invoices for ${month}: ${JSON.stringify(acmeInvoices)}`);
  const events = [...posted.get(acme.name) ?? await postEvents(admin, acme, project),
                  ...posted.get(beta.name) ?? await postEvents(admin, beta, null)];

  setStep('admin: queue page');
  await nav(page, 'Queue', 'Queue');
  await idle(page);
  const row = page.locator(`tbody tr[data-key="${waiting.id}"]`);
  await row.waitFor({ timeout });
  const text = await row.textContent();
  check(text.includes('acme') && text.includes(project.name) && text.includes('Over project quota') &&
        text.includes('quota exceeded at project level'), `the admin's queue shows acme's waiting allocation as: ${text}`);
  await shot(page, '20-admin-queue');

  setStep('admin: usage page, the last 7 days');
  await nav(page, 'Usage', 'Usage');
  await idle(page);
  const byDay = await openChart(page, 'Usage events in GiB, by tenant', timeout);
  await checkEventTable(kit, byDay, events, utcDay, (e) => e.tenant, 'egress by day');
  const gpu = await openChart(page, 'GPU-hours held, by tenant', timeout);
  check(/acme/.test(await gpu.locator('.chart-legend').textContent()), "the GPU-hours chart's key does not name acme");
  await checkCsv(kit, page, '/v1/usage', [acme.id, beta.id]);
  await shot(page, '21-admin-usage');

  setStep('admin: usage page, the last 12 months with the invoiced amounts');
  await page.getByLabel('Range', { exact: true }).selectOption('12mo');
  check(await page.getByLabel('Granularity', { exact: true }).inputValue() === 'month', 'over 12 months the granularity is not by month');
  check(await page.locator('select[name="granularity"] option[value="hour"]').isDisabled(),
        'hourly periods over 12 months are offered');
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.waitForURL((u) => u.search.includes('range=12mo'), { timeout });
  await idle(page);
  const byMonth = await openChart(page, 'Usage events in GiB, by tenant', timeout);
  await checkEventTable(kit, byMonth, events, utcMonth, (e) => e.tenant, 'egress by month');
  const invoiced = await openChart(page, 'Invoiced in USD, by tenant', timeout);
  // Written as the console writes amounts: the exact decimal, rounded half to even (web/src/money.ts).
  const micros = acmeInvoices[0].total_micros;
  const want = await page.evaluate((d) => new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', roundingMode: 'halfEven' })
    .format(d), `${Math.trunc(micros / 1e6)}.${String(micros % 1e6).padStart(6, '0')}`);
  const got = await chartCell(invoiced, `${month}-01T00:00:00.000Z`, 'acme');
  check(got === want, `acme's invoiced amount for ${month} reads "${got}", not ${want} (the invoice's total)`);
  await shot(page, '21b-admin-usage-12-months');

  setStep('admin: usage page, the last 30 days (a chart table taller than its box)');
  await page.getByLabel('Range', { exact: true }).selectOption('30d');
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.waitForURL((u) => u.search.includes('range=30d'), { timeout });
  await idle(page);
  const byDay30 = await openChart(page, 'Usage events in GiB, by tenant', timeout);
  // 30 rows scroll in the table's box: keyboard users can reach it to scroll it (web/src/dom.ts).
  const box = byDay30.locator('.chart-table[tabindex="0"][role="group"]');
  await box.waitFor({ timeout });
  check(await box.getAttribute('aria-label') === 'Usage events in GiB, by tenant',
        `the scrolling chart table is named "${await box.getAttribute('aria-label')}"`);
  await shot(page, '21c-admin-usage-30-days');

  setStep('admin: SLA page');
  await nav(page, 'SLA', 'SLA standing');
  await idle(page);
  const sla = page.locator(`tbody tr[data-key^="${acme.id}/"]`).filter({ hasText: OFFERING });
  await sla.waitFor({ timeout });
  const slaText = await sla.textContent();
  check(slaText.includes('acme') && /100\.000000%/.test(slaText) && slaText.includes('meets target'),
        `the admin's SLA row for acme reads: ${slaText}`);
  await shot(page, '22-admin-sla');
  // Last month nothing ran: the month picker shows the empty state.
  const d = new Date();
  const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1)).toISOString().slice(0, 7);
  await page.getByLabel('Month (UTC)', { exact: true }).fill(last);
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.getByText('No allocations with an SLA ran in this month.').waitFor({ timeout });
  check(new URL(page.url()).searchParams.get('period') === last, `after picking ${last} the address is ${page.url()}`);

  await withdraw(admin, acme, waiting);
  // Back where console_test.mjs left the admin: its next step goes back in history to this page.
  await nav(page, 'Audit trail', 'Audit trail');
  await idle(page);
  log('admin: queue, usage (with invoiced amounts) and SLA pages checked');
}
