// The Jobs page (called from console_test.mjs once alice, the admin of acme, and bob, the admin of
// beta, are both logged in; then for the platform admin).
//
// The platform admin's API client gives each tenant a project of its own and submits one job
// there. No agent runs these, so both stay queued with the scheduler's reason: acme's project
// gets none of acme's quota (nominal 0), and beta has no quota at all. Then, as each tenant's
// admin:
//   - Jobs lists the tenant's own job (name, project, state, the reason it waits, the offering)
//     and nothing of the other tenant's; the other tenant's job answers 404 to this session;
//   - the job's page shows its state and reason, its allocation pending with the scheduler's
//     reason, its history and its (empty) output;
//   - Cancel asks first: "Keep the job" leaves it queued and focus back on the button; confirming
//     sends the cancel with the CSRF header, and the job reads cancelled on the page and in the API.
// Then a job of alice's runs on acme's own pool node, whose agent the test plays (heartbeats with
// the member's reports): its page shows the member running there and the last 200 of its 250
// lines of output, picks up the lines reported next while it is open (it refreshes while the job
// is live), and reads succeeded once the member exits 0.
// The platform admin opens acme's jobs from Tenants, picks beta on the page, and opens beta's
// cancelled job, which offers no Cancel.

const OFFERING = 'a100-mig-1g';
const MODEL = 'A100-40GB';
// A whole GPU of acme's pool (console_test.mjs enrols its node); priced by the account pages' card.
const POOL_OFFERING = 'a100-pool';

function jobApiPath(tenant, job) {
  return `/v1/tenants/${tenant.id}/projects/${job.project_id}/jobs/${job.id}`;
}

/** A project of the tenant's own and a job there that waits over quota. */
async function seedJob(kit, admin, tenant, { zeroProjectQuota }) {
  const project = await admin('POST', `/v1/tenants/${tenant.id}/projects`, { name: `${tenant.name}-batch` });
  // Left unset, a project may use all of its tenant's quota: nominal 0 gives it none.
  if (zeroProjectQuota)
    await admin('PUT', `/v1/tenants/${tenant.id}/projects/${project.id}/quota`, { models: { [MODEL]: { nominal: 0 } } });
  const job = await admin('POST', `/v1/tenants/${tenant.id}/projects/${project.id}/jobs`, {
    name: `train-${tenant.name}`, image: 'registry.example.com/e2e/trainer:1.0',
    command: ['python', 'train.py'], args: ['--epochs', '3'], offering: OFFERING,
  });
  kit.check(job.state === 'queued' && job.allocation?.state === 'pending' && job.allocation.reason_code === 'quota_exceeded' &&
            job.reason !== '', `${tenant.name}'s job is ${job.state} (${job.reason}), its allocation ${JSON.stringify(job.allocation)}`);
  return { project, job };
}

/** The row keys of the jobs table on the page. */
function rowKeys(page) {
  return page.locator('main tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-key')));
}

async function tenantSeesOwnJob(kit, admin, { page, tenant, who }, own, other, n) {
  const { check, shot, heading, nav, idle, timeout, setStep } = kit;
  const { job, project } = own;

  setStep(`${who} lists the tenant's jobs`);
  await nav(page, 'Jobs', 'Jobs');
  await idle(page);
  const row = page.locator(`tbody tr[data-key="${job.id}"]`);
  await row.waitFor({ timeout });
  const text = await row.textContent();
  check(text.includes(job.name) && text.includes(project.name) && /queued/.test(text) && text.includes(job.reason) &&
        text.includes(OFFERING), `${who}'s job row reads: ${text}`);
  const keys = await rowKeys(page);
  check(keys.length === 1 && keys[0] === job.id, `${who}'s Jobs page lists [${keys.join(', ')}], not only ${job.id}`);
  const mainText = await page.locator('main').textContent();
  check(!mainText.includes(other.job.id) && !mainText.includes(other.job.name) && !mainText.includes(other.project.name),
        `${who}'s Jobs page names the other tenant's job or project`);
  // Asked directly, the other tenant's job does not exist for this session (404, never 403).
  const probePath = jobApiPath(other.tenant, other.job);
  const probe = await page.evaluate(async (p) => (await fetch(p)).status, probePath);
  check(probe === 404, `${who}: GET ${probePath} (the other tenant's job) answered ${probe}, not 404`);
  await shot(page, `${n}-${who}-jobs`);

  setStep(`${who} opens the job and sees why it waits`);
  await row.getByRole('link', { name: job.name, exact: true }).click();
  await heading(page, `Job ${job.name}`);
  await idle(page);
  const state = page.getByTestId('job-state');
  check((await state.textContent()).trim() === 'queued', `${who}'s job reads "${await state.textContent()}", not queued`);
  check((await page.getByTestId('job-reason').textContent()) === job.reason,
        `${who}'s job's reason reads "${await page.getByTestId('job-reason').textContent()}", not "${job.reason}"`);
  const waiting = await page.getByTestId('job-waiting').textContent();
  check(/pending/.test(waiting) && /quota exceeded/.test(waiting) && waiting.includes(job.allocation.reason),
        `${who}'s job page says of its allocation: ${waiting}`);
  check(await page.getByTestId('job-events').locator('li').count() >= 1, `${who}'s job page shows no history`);
  check(/No output yet/.test(await page.getByTestId('job-logs').textContent()),
        `${who}'s queued job shows output: ${await page.getByTestId('job-logs').textContent()}`);
  await shot(page, `${n + 1}-${who}-job`);

  setStep(`${who} cancels the job after the confirmation`);
  const path = jobApiPath(tenant, job);
  const cancel = page.getByRole('button', { name: 'Cancel job', exact: true });
  const dialog = page.getByRole('dialog', { name: `Cancel job ${job.name}?` });
  await cancel.click();
  await dialog.waitFor({ timeout });
  check(await page.evaluate(() => !!document.activeElement?.closest('dialog[open]')), 'focus did not move into the cancel confirmation');
  await dialog.getByRole('button', { name: 'Keep the job', exact: true }).click();
  await dialog.waitFor({ state: 'detached', timeout: 5000 });
  check(await page.evaluate(() => document.activeElement?.textContent) === 'Cancel job', 'after "Keep the job" focus is not back on Cancel job');
  const kept = await admin('GET', path);
  check(kept.state === 'queued', `"Keep the job" left ${who}'s job ${kept.state}`);
  await cancel.click();
  await dialog.waitFor({ timeout });
  await shot(page, `${n + 1}b-${who}-job-cancel-confirm`);
  const answer = page.waitForResponse((r) => r.url().endsWith(`${path}/cancel`) && r.request().method() === 'POST', { timeout });
  await dialog.getByRole('button', { name: `Cancel job ${job.name}`, exact: true }).click();
  const res = await answer;
  check(res.status() === 200, `the cancel answered ${res.status()}: ${await res.text().catch(() => '')}`);
  check(!!(await res.request().headerValue('x-csrf-token')), 'the cancel was sent without the X-CSRF-Token header');
  await dialog.waitFor({ state: 'detached', timeout: 5000 });
  await page.locator('.notice.success').filter({ hasText: `Job ${job.name} cancelled.` }).waitFor({ timeout });
  await state.filter({ hasText: /^cancelled$/ }).waitFor({ timeout });
  check(await cancel.count() === 0, `${who}'s cancelled job still offers Cancel job`);
  check(await page.getByTestId('job-waiting').count() === 0, `${who}'s cancelled job still says it waits`);
  const after = await admin('GET', path);
  check(after.state === 'cancelled' && after.allocation?.state !== 'pending',
        `after the cancel the API says ${who}'s job is ${after.state}, its allocation ${after.allocation?.state}`);
  await shot(page, `${n + 2}-${who}-job-cancelled`);
  return probePath;
}

/** alice's job on acme's pool node, its output followed on its page until it succeeds. */
async function aliceFollowsRunningJob(kit, admin, { page, tenant }, { node, projectId }) {
  const { check, shot, heading, nav, idle, timeout, setStep } = kit;
  setStep("jobs: alice's job runs on acme's pool node");
  // The tenant's quota bounds its projects': raised first, lowered last.
  const quota = async (nominal) => {
    const tenantQuota = () => admin('PUT', `/v1/tenants/${tenant.id}/quota`, { models: { [MODEL]: { nominal } } });
    const projectQuota = () => admin('PUT', `/v1/tenants/${tenant.id}/projects/${projectId}/quota`, { models: { [MODEL]: { nominal } } });
    if (nominal > 1) {
      await tenantQuota();
      await projectQuota();
    } else {
      await projectQuota();
      await tenantQuota();
    }
  };
  await admin('POST', '/v1/offerings', { name: POOL_OFFERING, tier: 'dedicated-pool', models: [MODEL], gpus: 1 });
  // A whole GPU beside alice's MIG instance: two for the time it runs, one again after.
  await quota(2);
  const job = await admin('POST', `/v1/tenants/${tenant.id}/projects/${projectId}/jobs`, {
    name: 'e2e-epochs', image: 'registry.example.com/e2e/trainer:1.0', command: ['python', 'train.py'],
    offering: POOL_OFFERING });
  check(job.state === 'starting', `alice's pool job is ${job.state} (${job.reason}), not starting`);
  const assigned = (await node('POST', '/v1/agent/heartbeat', {})).assignments.jobs?.find((m) => m.job === job.id);
  check(assigned, `acme's pool node is not assigned a member of ${job.id}`);
  let offset = 0;
  const report = async (state, text, extra = {}) => {
    const end = offset + Buffer.byteLength(text);
    await node('POST', '/v1/agent/heartbeat', { jobs: [{ job: job.id, rank: assigned.rank, attempt: assigned.attempt,
                                                         state, log_offset: offset, log_end: end, log: text, ...extra }] });
    offset = end;
  };
  const lines = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => `step ${from + i} loss ${(1 / (from + i)).toFixed(4)}\n`).join('');
  await report('running', lines(1, 250));
  // Its GPU's sample, as the node reports it with a heartbeat: the job's page charts it.
  const running = await admin('GET', jobApiPath(tenant, job));
  const held = (await admin('GET', `/v1/tenants/${tenant.id}/allocations`)).items.find((a) => a.id === running.allocation?.id);
  const gpu = held?.placement?.gpus?.[0]?.gpu;
  check(gpu, `alice's pool job's allocation holds no GPU: ${JSON.stringify(held?.placement)}`);
  await node('POST', '/v1/agent/heartbeat', { samples: [{ gpu_uuid: gpu, util_pct: 64, mem_used_bytes: 2 ** 30 }] });

  await nav(page, 'Jobs', 'Jobs');
  await idle(page);
  await page.locator(`tbody tr[data-key="${job.id}"]`).getByRole('link', { name: job.name, exact: true }).click();
  await heading(page, `Job ${job.name}`);
  await idle(page);
  const state = page.getByTestId('job-state');
  check((await state.textContent()).trim() === 'running', `alice's pool job reads "${await state.textContent()}", not running`);
  const nodeId = (await admin('GET', jobApiPath(tenant, job))).members.find((m) => m.rank === assigned.rank)?.node_id;
  const member = await page.locator(`table.job-members tbody tr[data-rank="${assigned.rank}"]`).textContent();
  check(nodeId && /running/.test(member) && member.includes(nodeId), `the member row reads: ${member} (node ${nodeId})`);
  const chartFigure = page.getByTestId('job-utilization').locator('figure.chart');
  await chartFigure.waitFor({ timeout });
  const charted = await chartFigure.locator('table').textContent();
  check(charted.includes(gpu) && charted.includes('64 %'), `the job's utilization chart holds: ${charted}`);
  const output = page.getByTestId('job-logs').locator('pre');
  // Like a terminal, the box shows the end of the output.
  const atEnd = () => output.evaluate((el) => el.scrollHeight > el.clientHeight && el.scrollTop + el.clientHeight >= el.scrollHeight - 8);
  check(await atEnd(), 'the output box does not show the end of the output');
  const shown = (await output.textContent()).split('\n').filter(Boolean);
  check(shown.length === 200 && shown[0].startsWith('step 51 ') && shown[199].startsWith('step 250 '),
        `of 250 lines the output shows ${shown.length}, from "${shown[0]}" to "${shown.at(-1)}"`);
  // Reported while the page is open: the page asks again within a few seconds.
  await report('running', lines(251, 252));
  await output.filter({ hasText: 'step 252 ' }).waitFor({ timeout });
  check(!(await output.textContent()).includes('step 52 '), 'the output holds more than the last 200 lines');
  check(await atEnd(), 'after the refresh the output box does not show the end of the output');
  await shot(page, '41c-alice-job-running');
  await report('exited', '', { exit_code: 0 });
  await state.filter({ hasText: /^succeeded$/ }).waitFor({ timeout });
  check(await page.getByRole('button', { name: 'Cancel job', exact: true }).count() === 0, 'a succeeded job offers Cancel job');
  const after = await admin('GET', jobApiPath(tenant, job));
  check(after.state === 'succeeded' && after.exit_code === 0 && after.allocation?.state === 'released',
        `after its member exited 0 the API says the job is ${after.state} (exit ${after.exit_code}), its allocation ${after.allocation?.state}`);
  await quota(1);
}

/**
 * One job for each of the two tenants; each tenant's admin sees only its own and cancels it.
 * Returns the jobs by tenant name ({project, job, tenant}) for the operator's look and the leak
 * checks, and the paths each page probed (they name the other tenant's job on purpose).
 */
export async function tenantJobPages(kit, { admin, alice, bob, pool }) {
  kit.setStep('jobs: seed a queued job for each tenant');
  const a = { ...await seedJob(kit, admin, alice.tenant, { zeroProjectQuota: true }), tenant: alice.tenant };
  const b = { ...await seedJob(kit, admin, bob.tenant, { zeroProjectQuota: false }), tenant: bob.tenant };
  const probes = [await tenantSeesOwnJob(kit, admin, alice, a, b, 40),
                  await tenantSeesOwnJob(kit, admin, bob, b, a, 43)];
  await aliceFollowsRunningJob(kit, admin, alice, pool);
  kit.log("alice and bob: each lists, opens and cancels only its own job; alice's running job's output followed");
  return { tenants: { [alice.tenant.name]: a, [bob.tenant.name]: b }, probes };
}

/** The platform admin: acme's jobs from Tenants, then beta's picked on the page. */
export async function operatorJobPages(kit, { page, jobs }) {
  const { check, shot, heading, nav, idle, timeout, setStep, log } = kit;
  const { acme, beta } = jobs.tenants;

  setStep("admin opens acme's jobs from Tenants");
  await nav(page, 'Tenants', 'Tenants');
  await idle(page);
  await page.getByRole('link', { name: 'Jobs of acme', exact: true }).click();
  await heading(page, 'Jobs');
  await idle(page);
  check(new URL(page.url()).searchParams.get('tenant') === acme.tenant.id, `"Jobs of acme" led to ${page.url()}`);
  await page.locator(`tbody tr[data-key="${acme.job.id}"]`).waitFor({ timeout });
  // acme's queued job and alice's that ran; nothing of beta's.
  let keys = await rowKeys(page);
  check(keys.length === 2 && !keys.includes(beta.job.id), `the admin's jobs of acme are [${keys.join(', ')}]`);

  setStep('admin picks beta on the Jobs page');
  const picker = page.getByLabel('Tenant', { exact: true });
  check(await picker.inputValue() === acme.tenant.id, `the tenant picker shows ${await picker.inputValue()}, not acme`);
  await picker.selectOption({ label: 'beta' });
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.waitForURL((u) => u.searchParams.get('tenant') === beta.tenant.id, { timeout });
  const row = page.locator(`tbody tr[data-key="${beta.job.id}"]`);
  await row.waitFor({ timeout });
  await heading(page, 'Jobs');
  await idle(page);
  keys = await rowKeys(page);
  check(keys.length === 1, `the admin's jobs of beta are [${keys.join(', ')}]`);
  check(/cancelled/.test(await row.textContent()), `beta's job reads: ${await row.textContent()}`);
  await shot(page, '46-admin-jobs');

  setStep("admin opens beta's cancelled job");
  await row.getByRole('link', { name: beta.job.name, exact: true }).click();
  await heading(page, `Job ${beta.job.name}`);
  await idle(page);
  check((await page.getByTestId('job-state').textContent()).trim() === 'cancelled', "beta's job does not read cancelled");
  check(await page.getByRole('button', { name: 'Cancel job', exact: true }).count() === 0, 'a cancelled job offers Cancel job');
  check(/beta/.test(await page.locator('dl.facts').textContent()), "the admin's job page does not name its tenant");
  await shot(page, '47-admin-job');
  log('admin: jobs of acme from Tenants, of beta from the picker');
}
