// End-to-end test of the web console: a real `gpuplane serve`, a real OpenID provider
// (tests/support/oidc_provider.mjs) and Debian's Chromium driven by playwright-core.
//
//   GP_BINARY=build/src/gpuplane GP_SOURCE_DIR=. node tests/e2e/console_test.mjs
//
// Environment:
//   GP_BINARY          the gpuplane binary (default: $GP_SOURCE_DIR/build/src/gpuplane)
//   GP_SOURCE_DIR      the repository (default: two levels above this file)
//   GP_E2E_CONSOLE_DIR serve the console from this directory (e.g. web/dist after
//                      `npx vite build --config web/vite.config.ts`) instead of the binary's own
//   GP_E2E_ARTIFACTS   where screenshots, the servers' logs and axe-violations.json go
//                      (default /tmp/gp-e2e-artifacts)
//   GP_CHROMIUM        the browser (default /usr/bin/chromium)
//   GP_E2E_SKIP        page modules to leave out while one is being written: insight, account, jobs
//
// What it shows:
//   - alice (group acme-admins) logs in through OIDC from the login page, creates a project,
//     creates an API key and sees its secret once (the key works; hidden, it is gone from the
//     page), requests an allocation after the scheduler's dry-run answer, and sees her lists;
//   - bob (beta-admins), in another browser context, logs in the same way and sees nothing of
//     acme: no response his page receives names acme's tenant id, project or alice's key;
//   - with both logged in, each tenant's Jobs page lists only its own queued job, its page says
//     why it waits, and Cancel (after a confirmation) turns it cancelled (job_pages.mjs);
//   - admin logs in with the bootstrap password using the keyboard only; the fleet page draws
//     the nodes and GPUs (MIG instances coloured by holder tenant), a node's detail with the
//     allocations on it, drains that node after a confirmation listing them (then resumes it), the tenants
//     page lists both tenants, a tenant's posture, the audit page shows the verified chain and
//     pages through the records with the `next` cursor, a tenant's jobs from the tenants page
//     and another's from the page's tenant picker; logout ends the session;
//   - the console's pages carry the CSP header, deep links work (history routing), focus moves
//     to each page's heading, and no page throws or violates the CSP;
//   - axe-core (the npm package) checks every page a screenshot is taken of: any serious or
//     critical accessibility violation fails the test; all of them, with their pages, are listed
//     in axe-violations.json among the artifacts.
// Exit status 0 on success; otherwise 1 with the failed check on stderr. Every child process is
// killed on the way out, on failure too.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { operatorInsightPages, tenantInsightPages } from './insight_pages.mjs';
import { tenantAccountPages } from './account_pages.mjs';
import { operatorJobPages, tenantJobPages } from './job_pages.mjs';

const t0 = Date.now();
const here = path.dirname(fileURLToPath(import.meta.url));
const SOURCE = path.resolve(process.env.GP_SOURCE_DIR || path.join(here, '..', '..'));
const BINARY = path.resolve(process.env.GP_BINARY || path.join(SOURCE, 'build', 'src', 'gpuplane'));
const ARTIFACTS = path.resolve(process.env.GP_E2E_ARTIFACTS || '/tmp/gp-e2e-artifacts');
const CHROMIUM = process.env.GP_CHROMIUM || '/usr/bin/chromium';
// The console built into the binary, unless GP_E2E_CONSOLE_DIR names a vite build to serve.
const CONSOLE_DIR = process.env.GP_E2E_CONSOLE_DIR || '';
const STEP_TIMEOUT_MS = 15_000;
const SKIP = new Set((process.env.GP_E2E_SKIP || '').split(',').filter(Boolean));

const children = [];
let browser = null;
let workDir = null;
let step = 'start';

function log(...parts) {
  const s = ((Date.now() - t0) / 1000).toFixed(1).padStart(5);
  console.log(`[${s}s] ${parts.join(' ')}`);
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

function killChildren() {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      try {
        c.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

async function stopChildren() {
  await Promise.all(children.map((c) => new Promise((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    const timer = setTimeout(() => {
      try { c.kill('SIGKILL'); } catch { /* gone */ }
      resolve();
    }, 3000);
    c.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    try { c.kill('SIGTERM'); } catch { resolve(); }
  })));
}

// Whatever happens, no server outlives the test.
process.on('exit', killChildren);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    killChildren();
    process.exit(1);
  });
}

function startChild(name, cmd, args) {
  const out = path.join(ARTIFACTS, `${name}.log`);
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: SOURCE });
  const chunks = [];
  const keep = (d) => chunks.push(d);
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  child.on('exit', () => {
    try { writeFileSync(out, Buffer.concat(chunks)); } catch { /* best effort */ }
  });
  child.logText = () => Buffer.concat(chunks).toString('utf8');
  child.procName = name;
  children.push(child);
  return child;
}

async function waitFor(what, fn, timeoutMs = STEP_TIMEOUT_MS, child = null) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (child && (child.exitCode !== null || child.signalCode !== null))
      throw new Error(`${child.procName} exited (${child.exitCode ?? child.signalCode}) while waiting for ${what}:\n${child.logText().slice(-3000)}`);
    try {
      const v = await fn();
      if (v) return v;
    } catch {
      // not yet
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------------------------------------
// The servers

async function startProvider() {
  const portFile = path.join(workDir, 'oidc.port');
  const child = startChild('oidc_provider', process.execPath, [
    path.join(SOURCE, 'tests', 'support', 'oidc_provider.mjs'),
    '--port-file', portFile, '--client-secret', 'e2e-client-secret', '--other-secret', 'e2e-other-secret']);
  const issuer = await waitFor('the OpenID provider', () =>
    existsSync(portFile) && readFileSync(portFile, 'utf8').trim(), 20_000, child);
  return { issuer, child };
}

function writeOidcConfig(issuer, role) {
  const secretFile = path.join(workDir, 'oidc-client.secret');
  writeFileSync(secretFile, 'e2e-client-secret\n', { mode: 0o600 });
  const config = {
    providers: [{
      name: 'test',
      display_name: 'Test SSO',
      issuer,
      client_id: 'gpuplane',
      client_secret_file: secretFile,
      scopes: ['openid', 'email', 'profile', 'groups'],
      rules: [
        { claim: 'groups', value: 'acme-admins', tenant: 'acme', role },
        { claim: 'groups', value: 'beta-admins', tenant: 'beta', role },
      ],
    }],
  };
  const file = path.join(workDir, 'oidc.json');
  writeFileSync(file, JSON.stringify(config, null, 2), { mode: 0o600 });
  return file;
}

async function startServe(oidcConfig, dataName) {
  const dataDir = path.join(workDir, dataName);
  mkdirSync(dataDir, { recursive: true });
  const portFile = path.join(workDir, 'gp.port');
  rmSync(portFile, { force: true });
  const child = startChild('gpuplane', BINARY, [
    'serve', '--plaintext', '--listen', '127.0.0.1:0', '--port-file', portFile,
    '--data', dataDir, '--bootstrap-credential-file', path.join(workDir, 'cred'),
    '--oidc-config', oidcConfig, ...(CONSOLE_DIR ? ['--console-dir', CONSOLE_DIR] : [])]);
  const port = await waitFor('gpuplane serve to listen', () =>
    existsSync(portFile) && readFileSync(portFile, 'utf8').trim(), 30_000, child);
  const base = `http://127.0.0.1:${port}`;
  await waitFor('gpuplane to lead (ready for writes)', async () =>
    (await fetch(`${base}/readyz?role=leader`)).ok, 30_000, child);
  return { base, child };
}

function readCredential() {
  const text = readFileSync(path.join(workDir, 'cred'), 'utf8');
  const field = (k) => new RegExp(`^${k}:\\s*(\\S+)`, 'm').exec(text)?.[1];
  const cred = { username: field('username'), password: field('password'), apiKey: field('api_key') };
  check(cred.username && cred.password && cred.apiKey, `unreadable bootstrap credential file:\n${text}`);
  return cred;
}

function apiClient(base, token) {
  return async (method, p, body, { expect } = {}) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    const want = expect ?? [200, 201, 204];
    check(want.includes(res.status), `${method} ${p}: HTTP ${res.status}, wanted ${want.join('/')}: ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

// ---------------------------------------------------------------------------------------------
// Fixtures: two tenants, a small fleet with a MIG GPU, an offering and quota for acme.

function inventory(name, rack, gpus) {
  return { node: { name, rack, cpu_millis: 64000, memory_bytes: 512 * 2 ** 30 }, gpus };
}

function a100(node, index, extra) {
  const hex = (node * 16 + index).toString(16).padStart(12, '0');
  return { uuid: `GPU-e2e00000-0000-4000-8000-${hex}`, index, model: 'NVIDIA A100-SXM4-40GB',
           memory_bytes: 40 * 2 ** 30, mig_capable: true, mode: 'whole', ...extra };
}

async function seed(api) {
  const acme = await api('POST', '/v1/tenants', { name: 'acme', display_name: 'Acme Corp', isolation_class: 'standard' });
  const beta = await api('POST', '/v1/tenants', { name: 'beta', display_name: 'Beta Labs', isolation_class: 'standard' });
  await api('POST', '/v1/fleet/import', { nodes: [
    { ready: true, inventory: inventory('gpu-node-1', 'r1', [
      a100(1, 0, { mode: 'mig', mig_instances: [{ profile: '3g.20gb', start: 0 }, { profile: '2g.10gb', start: 4 },
                                                 { profile: '1g.5gb', start: 6 }] }),
      a100(1, 1),
    ]) },
    { ready: true, inventory: inventory('gpu-node-2', 'r2', [
      a100(2, 0), a100(2, 1, { health: { xid_errors: [79], ecc_uncorrected: 0 } }),
    ]) },
  ] });
  await api('POST', '/v1/offerings', { name: 'a100-mig-1g', tier: 'mig', models: ['A100-40GB'],
                                       mig_profile: '1g.5gb', description: 'One 1g.5gb MIG instance' });
  await api('PUT', '/v1/tenants/acme/quota', { models: { 'A100-40GB': { nominal: 1 } } });
  // Enough audit records for the audit page to have a second page (50 a page).
  for (let i = 0; i < 55; i += 1)
    await api('POST', '/v1/service-accounts', { name: `e2e-sa-${i}` });
  return { acme, beta };
}

// ---------------------------------------------------------------------------------------------
// Browser helpers

function watchPage(page, who, problems) {
  page.on('pageerror', (err) => problems.push(`${who}: uncaught error in the page: ${err.message}`));
  page.on('console', (msg) => {
    const text = msg.text();
    if (/Content[- ]Security[- ]Policy|Refused to (load|execute|apply)/i.test(text))
      problems.push(`${who}: CSP violation: ${text}`);
  });
}

async function shot(page, name) {
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot ${file}`);
  await audit(page, name);
}

// Accessibility: axe-core's rules on every page the test takes a screenshot of. Violations of
// these impacts fail the test (at the end, so one run lists them all); the others are reported.
const AXE_FAILING = new Set(['serious', 'critical']);
const axeFindings = [];
let axeSource = null;

async function audit(page, name) {
  if (axeSource === null) {
    let file;
    try {
      file = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
    } catch (err) {
      throw new Error(`cannot find axe-core (${err.code || err.message}); run \`npm ci\` in ${SOURCE}`);
    }
    axeSource = readFileSync(file, 'utf8');
  }
  // Evaluated rather than added as a <script>: the console's CSP (script-src 'self') refuses
  // inline scripts, and evaluate() is not subject to it, so the pages run under the CSP as served.
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      rule: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl, nodes: v.nodes.length,
      targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')), summary: v.nodes[0]?.failureSummary ?? '',
    }));
  });
  for (const v of violations) axeFindings.push({ page: name, screenshot: `${name}.png`, url: page.url(), ...v });
  // Rewritten after each page, so a run that fails early still leaves what was found.
  writeFileSync(path.join(ARTIFACTS, 'axe-violations.json'), `${JSON.stringify(axeFindings, null, 2)}\n`);
  if (violations.length)
    log(`axe: ${name} has ${violations.map((v) => `${v.rule} (${v.impact})`).join(', ')}`);
}

/** "11-admin-audit.png: color-contrast (serious) Elements must meet ... [td.x | th.y | p] +4 more". */
function describeFinding(v) {
  const more = v.nodes > v.targets.length ? ` +${v.nodes - v.targets.length} more` : '';
  return `${v.screenshot}: ${v.rule} (${v.impact}) ${v.help} [${v.targets.join(' | ')}]${more}`;
}

async function heading(page, text) {
  const h1 = page.locator('main h1');
  await h1.filter({ hasText: text }).waitFor({ timeout: STEP_TIMEOUT_MS });
  // Focus goes to the new page's heading, for keyboard and screen-reader users.
  await page.waitForFunction(() => document.activeElement?.tagName === 'H1', null, { timeout: 5000 });
}

async function nav(page, label, title) {
  await page.locator('nav[aria-label="Main"]').getByRole('link', { name: label, exact: true }).click();
  await heading(page, title);
  const current = await page.locator('nav[aria-label="Main"] a[aria-current="page"]').textContent();
  check(current === label, `nav: aria-current is on "${current}", not "${label}"`);
}

async function idle(page) {
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'), null, { timeout: STEP_TIMEOUT_MS });
}

// The browser must hold both cookies a login sets (docs/oidc.md): the HttpOnly session and the
// CSRF token the page echoes.
async function expectSessionCookies(page, what, response) {
  const names = (await page.context().cookies()).map((c) => c.name);
  if (names.includes('gp_session') && names.includes('gp_csrf')) return;
  const sent = (await response.headersArray()).filter((x) => x.name.toLowerCase() === 'set-cookie')
    .map((x) => x.value.replace(/=[^;]*/, '=...'));
  throw new Error(`after ${what} the browser holds cookies [${names.join(', ')}], not gp_session and gp_csrf; ` +
                  `the response's Set-Cookie headers were: ${sent.length ? sent.join(' | ') : '(none)'}`);
}

async function oidcLogin(page, base, issuer, account, expectTenant) {
  const r = await fetch(`${issuer}/test/next-login?account=${account}`, { method: 'POST' });
  check(r.ok, `the provider refused next-login ${account}: HTTP ${r.status}`);
  await page.goto(`${base}/console/`);
  await heading(page, 'Sign in to gpuplane');
  check(new URL(page.url()).pathname === '/console/login', `a stranger at /console/ lands on ${page.url()}, not the login page`);
  const button = page.getByRole('link', { name: 'Sign in with Test SSO' });
  await button.waitFor({ timeout: STEP_TIMEOUT_MS });
  const callback = page.waitForResponse((r) => r.url().startsWith(`${base}/v1/auth/oidc/test/callback`),
                                        { timeout: STEP_TIMEOUT_MS });
  await button.click();
  const answer = await callback;
  const detail = answer.status() === 302 ? '' : await answer.text().catch(() => '');
  check(answer.status() === 302, `the OIDC callback answered ${answer.status()}, not a redirect: ${detail}`);
  await page.waitForURL((u) => u.origin === base && u.pathname.startsWith('/console/'), { timeout: STEP_TIMEOUT_MS });
  await expectSessionCookies(page, 'the OIDC callback', answer);
  await heading(page, 'Projects');
  const name = await page.getByTestId('who-name').textContent();
  const tenant = await page.getByTestId('who-tenant').textContent();
  check(name === account, `after ${account}'s OIDC login the header names "${name}"`);
  check(tenant === expectTenant, `${account}'s header names tenant "${tenant}", not ${expectTenant}`);
}

// What the page modules (insight_pages.mjs, account_pages.mjs) get to drive the browser.
const kit = {
  log, check, shot, heading, nav, idle, timeout: STEP_TIMEOUT_MS,
  setStep: (s) => { step = s; },
};

// A tenant's pages from the page modules; GP_E2E_SKIP=insight,account leaves a module out.
async function tenantPages(who) {
  if (!SKIP.has('insight')) await tenantInsightPages(kit, who);
  if (!SKIP.has('account')) await tenantAccountPages(kit, who);
}

// ---------------------------------------------------------------------------------------------

async function main() {
  step = 'preconditions';
  mkdirSync(ARTIFACTS, { recursive: true });
  for (const f of readdirSync(ARTIFACTS))
    if (/^failure-.*\.png$|^axe-violations\.json$/.test(f)) rmSync(path.join(ARTIFACTS, f), { force: true });
  check(existsSync(BINARY), `no gpuplane binary at ${BINARY} (set GP_BINARY)`);
  if (CONSOLE_DIR)
    check(existsSync(path.join(CONSOLE_DIR, 'index.html')),
          `no built console at ${CONSOLE_DIR}: run \`npx vite build --config web/vite.config.ts\``);
  check(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: apt-get install chromium (scripts/setup.sh does)`);
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (err) {
    throw new Error(`cannot load playwright-core (${err.code || err.message}); run \`npm ci\` in ${SOURCE}`);
  }
  workDir = mkdtempSync(path.join(tmpdir(), 'gp-e2e-'));

  step = 'start the OpenID provider';
  const { issuer } = await startProvider();
  log(`OpenID provider at ${issuer}`);

  step = 'start gpuplane serve';
  const { base } = await startServe(writeOidcConfig(issuer, 'tenant-admin'), 'data');
  log(`gpuplane at ${base}`);
  const cred = readCredential();
  const admin = apiClient(base, cred.apiKey);

  step = 'static serving';
  {
    const root = await fetch(`${base}/`, { redirect: 'manual' });
    check([301, 302, 303, 307, 308].includes(root.status) && root.headers.get('location')?.endsWith('/console/'),
          `GET / should redirect to /console/, got ${root.status} ${root.headers.get('location')}`);
    for (const p of ['/console/', '/console/fleet/nodes/n1', '/console/projects']) {
      const res = await fetch(`${base}${p}`);
      const body = await res.text();
      check(res.ok && body.includes('<div id="app">'), `GET ${p} should answer index.html, got ${res.status}`);
      const csp = res.headers.get('content-security-policy') ?? '';
      check(csp.includes("default-src 'self'") && csp.includes("frame-ancestors 'none'"), `GET ${p}: CSP header missing or weak: "${csp}"`);
    }
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(await (await fetch(`${base}/console/`)).text())?.[1];
    check(script, 'index.html names no script under /console/assets/');
    const js = await fetch(`${base}${script}`);
    check(js.ok && /javascript/.test(js.headers.get('content-type') ?? ''), `GET ${script}: ${js.status} ${js.headers.get('content-type')}`);
  }

  step = 'seed tenants, fleet, offering and quota';
  const { acme, beta } = await seed(admin);
  log(`tenants acme=${acme.id} beta=${beta.id}`);

  step = 'launch Chromium';
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  const problems = [];
  const viewport = { width: 1360, height: 900 };

  // ---- alice: OIDC login, project, API key, allocation --------------------------------------
  step = 'alice logs in through OIDC';
  const aliceCtx = await browser.newContext({ viewport });
  const alice = await aliceCtx.newPage();
  watchPage(alice, 'alice', problems);
  await oidcLogin(alice, base, issuer, 'alice', 'acme');
  await shot(alice, '01-alice-projects-empty');

  step = 'alice creates a project';
  const projectName = `acme-train-${Date.now().toString(36)}`;
  await alice.getByLabel('Name', { exact: true }).fill(projectName);
  await alice.getByRole('button', { name: 'Create project' }).click();
  await alice.locator('.notice.success').filter({ hasText: `Project ${projectName} created.` }).waitFor({ timeout: STEP_TIMEOUT_MS });
  const projectRow = alice.locator('tbody tr').filter({ hasText: projectName });
  await projectRow.waitFor({ timeout: STEP_TIMEOUT_MS });
  const projectId = (await projectRow.locator('.mono').textContent()).trim();
  check(/^prj_/.test(projectId), `the project row shows id "${projectId}"`);
  // The tenant admin's share for the project (the tenant's own quota was set by the operator).
  await admin('PUT', `/v1/tenants/acme/projects/${projectId}/quota`, { models: { 'A100-40GB': { nominal: 1 } } });

  step = 'alice creates an API key and sees its secret once';
  await nav(alice, 'API keys', 'API keys');
  await idle(alice);
  await alice.getByLabel('Name', { exact: true }).fill('alice-ci');
  await alice.getByRole('button', { name: 'Create key' }).click();
  const secret = alice.getByTestId('api-key-secret');
  await secret.waitFor({ timeout: STEP_TIMEOUT_MS });
  const token = (await secret.textContent()).trim();
  check(/^key_[A-Za-z0-9]+\.\S+$/.test(token), `the secret panel shows "${token}", not a key`);
  check(await alice.evaluate(() => document.activeElement?.id === 'secret-heading'), 'focus did not move to the secret panel');
  check(await alice.getByRole('button', { name: 'Copy' }).isVisible(), 'no Copy button beside the secret');
  const keyRow = alice.locator('tbody tr').filter({ hasText: 'alice-ci' });
  await keyRow.waitFor({ timeout: STEP_TIMEOUT_MS });
  const aliceKeyId = await keyRow.getAttribute('data-key');
  check(aliceKeyId && token.startsWith(`${aliceKeyId}.`), `key row id ${aliceKeyId} does not match the secret`);
  await shot(alice, '02-alice-api-key-created');
  const asAlice = await (await fetch(`${base}/v1/whoami`, { headers: { Authorization: `Bearer ${token}` } })).json();
  check(asAlice.name === 'alice', `the new key authenticates as "${asAlice.name}", not alice`);
  await alice.getByRole('button', { name: /I have stored it/ }).click();
  await alice.getByTestId('secret-panel').waitFor({ state: 'detached', timeout: 5000 });
  check(!(await alice.content()).includes(token.split('.')[1]), 'the secret is still in the page after hiding it');
  await alice.reload();
  await heading(alice, 'API keys');
  await idle(alice);
  check(!(await alice.content()).includes(token.split('.')[1]), 'the secret is shown again after a reload');

  step = 'alice requests an allocation after the dry run';
  await nav(alice, 'Allocations', 'Allocations');
  await idle(alice);
  await alice.getByLabel('Offering').selectOption('a100-mig-1g');
  await alice.getByLabel('Name (optional)').fill('notebook');
  await alice.getByRole('button', { name: 'Check availability' }).click();
  const dry = alice.getByTestId('dry-run');
  await dry.waitFor({ timeout: STEP_TIMEOUT_MS });
  const dryText = await dry.textContent();
  check(/would be placed now/.test(dryText), `the dry run says: ${dryText}`);
  await alice.getByRole('button', { name: 'Request it', exact: true }).click();
  await alice.locator('.notice.success').filter({ hasText: 'Allocation notebook is' }).waitFor({ timeout: STEP_TIMEOUT_MS });
  const allocRow = alice.locator('tbody tr').filter({ hasText: 'notebook' });
  await allocRow.waitFor({ timeout: STEP_TIMEOUT_MS });
  const allocText = await allocRow.textContent();
  check(/placed|active/.test(allocText), `alice's allocation row: ${allocText}`);
  // The row's key (its text runs the id into the next cell's, e.g. "alc_…acme").
  const allocId = await allocRow.getAttribute('data-key');
  check(/^alc_[A-Za-z0-9]+$/.test(allocId ?? ''), `alice's allocation row has key "${allocId}"`);
  await shot(alice, '03-alice-allocations');

  step = 'alice sees her GPU VM, reboots it and reads its serial console';
  // A node of acme's own pool with an agent's credential; an allocation of a vm offering lands
  // there, and the node's heartbeats (sent here as its agent would) carry the VM's reports.
  await admin('POST', '/v1/offerings', { name: 'a100-vm', tier: 'dedicated-pool', models: ['A100-40GB'], gpus: 1,
                                         delivery: 'vm', vm: { vcpus: 8, memory_mib: 65536 } });
  await admin('PUT', '/v1/tenants/acme/quota', { models: { 'A100-40GB': { nominal: 2 } } });
  await admin('PUT', `/v1/tenants/acme/projects/${projectId}/quota`, { models: { 'A100-40GB': { nominal: 2 } } });
  await admin('POST', '/v1/pools', { name: 'acme-vms', tenant: 'acme' });
  const joinToken = (await admin('POST', '/v1/join-tokens', { pool: 'acme-vms' })).token;
  const enrolled = await (await fetch(`${base}/v1/agent/enroll`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ join_token: joinToken, inventory: inventory('gpu-vm-node', 'r3', [a100(3, 0)]) }) })).json();
  check(enrolled.credential, `enrolment answered ${JSON.stringify(enrolled)}`);
  const nodeApi = apiClient(base, enrolled.credential);
  const vmAlloc = await admin('POST', `/v1/tenants/acme/projects/${projectId}/allocations`, { offering: 'a100-vm', name: 'vm-box' });
  check(vmAlloc.state === 'placed', `the VM allocation is ${vmAlloc.state}: ${vmAlloc.reason}`);
  const assigned = (await nodeApi('POST', '/v1/agent/heartbeat', {})).assignments.allocations.find((a) => a.id === vmAlloc.id);
  check(assigned?.vm?.domain, `the node's assignment has no VM for ${vmAlloc.id}`);
  const domain = assigned.vm.domain;
  const vmId = assigned.vm.id;
  await nodeApi('POST', '/v1/agent/heartbeat', { vms: [{ domain, state: 'running', addresses: ['10.64.0.7/24'] }] });
  await nav(alice, 'VMs', 'Virtual machines');
  await idle(alice);
  const vmRow = alice.locator('tbody tr').filter({ hasText: domain });
  await vmRow.waitFor({ timeout: STEP_TIMEOUT_MS });
  const vmText = await vmRow.textContent();
  check(/running/.test(vmText) && vmText.includes('10.64.0.7/24'), `alice's VM row: ${vmText}`);
  await alice.getByRole('button', { name: `Reboot ${domain}` }).click();
  const rebootDialog = alice.getByTestId('vm-reboot-dialog');
  await rebootDialog.waitFor({ timeout: STEP_TIMEOUT_MS });
  await rebootDialog.getByRole('button', { name: `Reboot ${domain}` }).click();
  await alice.locator('.notice.success').filter({ hasText: `${domain}: reboot requested` }).waitFor({ timeout: STEP_TIMEOUT_MS });
  const afterReboot = await admin('GET', `/v1/tenants/acme/vms/${vmId}`);
  check(afterReboot.reboot_seq === 1, `the reboot did not reach the VM record: reboot_seq ${afterReboot.reboot_seq}`);
  // The console: the page asks, the node's next heartbeat answers, the page shows the answer.
  await alice.getByRole('button', { name: `Console ${domain}` }).click();
  await waitFor('the console request to reach the node', async () => {
    const vm = (await nodeApi('POST', '/v1/agent/heartbeat', {})).assignments.allocations.find((a) => a.id === vmAlloc.id)?.vm;
    return vm && vm.console_seq > vm.console_captured_seq ? vm : null;
  });
  const bootText = 'Ubuntu 24.04 LTS vm-box ttyS0\n\nvm-box login: ';
  await nodeApi('POST', '/v1/agent/heartbeat', { vms: [{ domain, state: 'running', addresses: ['10.64.0.7/24'],
                                                          console: { seq: 1, text: bootText } }] });
  const consoleText = alice.getByTestId('vm-console');
  await consoleText.waitFor({ timeout: STEP_TIMEOUT_MS });
  check((await consoleText.textContent()).includes('vm-box login:'), `the console shows: ${await consoleText.textContent()}`);
  const consoleReads = (await admin('GET', '/v1/audit?action=vm.console')).items;
  check(consoleReads.length === 1 && consoleReads[0].tenant_id === acme.id, `audit of console reads: ${JSON.stringify(consoleReads)}`);
  await shot(alice, '03b-alice-vms-console');
  // Released: the node no longer holds it, the VM is destroyed; acme's quotas go back to what
  // the later pages expect (one GPU).
  await admin('POST', `/v1/tenants/acme/projects/${projectId}/allocations/${vmAlloc.id}/release`, {});
  await nodeApi('POST', '/v1/agent/heartbeat', { vms: [] });
  const destroyed = await admin('GET', `/v1/tenants/acme/vms/${vmId}`);
  check(destroyed.state === 'destroyed', `the released allocation's VM is ${destroyed.state}`);
  await admin('PUT', `/v1/tenants/acme/projects/${projectId}/quota`, { models: { 'A100-40GB': { nominal: 1 } } });
  await admin('PUT', '/v1/tenants/acme/quota', { models: { 'A100-40GB': { nominal: 1 } } });

  step = 'alice sees her project list';
  await nav(alice, 'Projects', 'Projects');
  await alice.locator('tbody tr').filter({ hasText: projectName }).waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(alice, '04-alice-projects');
  await tenantPages({ page: alice, admin, tenant: acme, who: 'alice' });

  // ---- bob: another tenant sees nothing of acme ---------------------------------------------
  step = 'bob logs in through OIDC and sees nothing of acme';
  const bobCtx = await browser.newContext({ viewport });
  const bob = await bobCtx.newPage();
  watchPage(bob, 'bob', problems);
  const bobResponses = [];
  bob.on('response', (res) => {
    bobResponses.push(res.text().then((body) => ({ url: res.url(), status: res.status(), body }),
                                      () => ({ url: res.url(), status: res.status(), body: '' })));
  });
  await oidcLogin(bob, base, issuer, 'bob', 'beta');
  await idle(bob);
  await bob.getByText('No projects yet.').waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(bob, '05-bob-projects');
  await nav(bob, 'API keys', 'API keys');
  await idle(bob);
  await bob.getByText('No API keys yet.').waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(bob, '05b-bob-api-keys');
  await nav(bob, 'Allocations', 'Allocations');
  await idle(bob);
  await shot(bob, '05c-bob-allocations');
  await nav(bob, 'VMs', 'Virtual machines');
  await idle(bob);
  await bob.getByText(/^No VMs\./).waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(bob, '05d-bob-vms');
  await tenantPages({ page: bob, admin, tenant: beta, who: 'bob' });
  // Both tenants' jobs, once both are logged in: each sees its own only (bob's page is in the
  // leak check below).
  const jobs = SKIP.has('jobs') ? null : await tenantJobPages(kit, {
    admin, alice: { page: alice, tenant: acme, who: 'alice' }, bob: { page: bob, tenant: beta, who: 'bob' },
    pool: { node: nodeApi, projectId } });
  // Deep links into acme answer 404 (never 403: existence is not leaked).
  const probes = await bob.evaluate(async (ids) => {
    const out = [];
    for (const p of [`/v1/tenants/${ids.tenant}/projects`, `/v1/tenants/${ids.tenant}/api-keys/${ids.key}`,
                     `/v1/tenants/beta/api-keys/${ids.key}`, `/v1/tenants/${ids.tenant}/projects/${ids.project}/allocations`,
                     `/v1/tenants/${ids.tenant}/vms/${ids.vm}`, `/v1/tenants/beta/vms/${ids.vm}`])
      out.push({ p, status: (await fetch(p)).status });
    return out;
  }, { tenant: acme.id, key: aliceKeyId, project: projectId, vm: vmId });
  for (const { p, status } of probes) check(status === 404, `bob: GET ${p} answered ${status}, not 404`);
  const secrets = { "acme's tenant id": acme.id, "acme's project id": projectId, "acme's project name": projectName,
                    "alice's key id": aliceKeyId, "acme's allocation id": allocId, "acme's VM id": vmId,
                    "acme's VM domain": domain,
                    ...(jobs ? { "acme's job id": jobs.tenants.acme.job.id, "acme's job name": jobs.tenants.acme.job.name,
                                 "acme's jobs project": jobs.tenants.acme.project.name } : {}) };
  const seen = await Promise.all(bobResponses);
  let checked = 0;
  for (const r of seen) {
    // His own probes name what he asked for.
    if (probes.some((x) => r.url.endsWith(x.p)) || jobs?.probes.some((p) => r.url.endsWith(p))) continue;
    checked += 1;
    for (const [what, value] of Object.entries(secrets))
      check(!r.body.includes(value) && !r.url.includes(value), `bob's page received ${what} (${value}) from ${r.url}`);
  }
  check(seen.some((r) => r.url.includes('/v1/tenants/') && r.url.includes('/projects')), "bob's page never listed projects");
  log(`bob: ${checked} responses checked, none names acme's objects`);

  // ---- admin: keyboard-only password login, operator pages ----------------------------------
  step = 'admin logs in with the keyboard only';
  const adminCtx = await browser.newContext({ viewport });
  const op = await adminCtx.newPage();
  watchPage(op, 'admin', problems);
  await op.goto(`${base}/console/fleet`);
  await heading(op, 'Sign in to gpuplane');
  check(new URL(op.url()).searchParams.get('next') === '/fleet', `the login page forgot where admin was going: ${op.url()}`);
  await op.keyboard.press('Tab');
  check(await op.evaluate(() => document.activeElement?.getAttribute('name')) === 'username', 'Tab from the heading does not reach the username field');
  await op.keyboard.type('admin');
  await op.keyboard.press('Tab');
  check(await op.evaluate(() => document.activeElement?.getAttribute('name')) === 'password', 'Tab from the username does not reach the password field');
  // A wrong password first: the error is shown and announced, focus back in the password field.
  await op.keyboard.type('not-the-password');
  await op.keyboard.press('Enter');
  await op.locator('[role="alert"]').filter({ hasText: 'Sign-in failed' }).waitFor({ timeout: STEP_TIMEOUT_MS });
  check(await op.evaluate(() => document.activeElement?.getAttribute('name')) === 'password', 'after a failed login focus is not in the password field');
  await shot(op, '06-login-error');
  await op.keyboard.type(cred.password);
  const login = op.waitForResponse((r) => r.url() === `${base}/v1/auth/login` && r.request().method() === 'POST',
                                   { timeout: STEP_TIMEOUT_MS });
  await op.keyboard.press('Enter');
  const loginAnswer = await login;
  check(loginAnswer.status() === 201, `the password login answered ${loginAnswer.status()}: ${await loginAnswer.text().catch(() => '')}`);
  await expectSessionCookies(op, 'the password login (cookie: true)', loginAnswer);
  await heading(op, 'Fleet');
  check(new URL(op.url()).pathname === '/console/fleet', `admin landed on ${op.url()}`);

  step = 'fleet page';
  await idle(op);
  await op.locator('tbody tr').filter({ hasText: 'gpu-node-1' }).waitFor({ timeout: STEP_TIMEOUT_MS });
  const bars = await op.locator('svg.gpu-bar').count();
  // The seed's two nodes of two GPUs, and the one-GPU node of acme's pool that held alice's VM.
  check(bars === 5, `the fleet page draws ${bars} GPUs, not 5`);
  const migLabel = await op.locator(`svg.gpu-bar[data-gpu="${a100(1, 0).uuid}"]`).getAttribute('aria-label');
  check(/3g\.20gb at slice 0/.test(migLabel) && /2g\.10gb at slice 4/.test(migLabel), `the MIG GPU is described as: ${migLabel}`);
  const labels = await op.locator('svg.gpu-bar').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label')));
  const held = labels.filter((l) => /1g\.5gb at slice \d, held by acme \(notebook\)/.test(l));
  check(held.length === 1, `one GPU should show acme's 1g.5gb instance; the GPUs read:\n  ${labels.join('\n  ')}`);
  check(await op.locator('.legend li[data-tenant="acme"]').count() === 1, 'the colour key does not name acme');
  check(/unhealthy/.test(await op.locator('tbody tr').filter({ hasText: 'gpu-node-2' }).textContent()), 'gpu-node-2 should show its unhealthy GPU');
  await shot(op, '07-admin-fleet');
  const heldNode = (await op.locator('tbody tr').filter({ has: op.locator('svg.gpu-bar[aria-label*="held by acme"]') })
    .locator('th a').textContent()).trim();
  await op.getByRole('link', { name: heldNode, exact: true }).click();
  await heading(op, `Node ${heldNode}`);
  await idle(op);
  await op.getByText(/1g\.5gb at slice \d: acme \(notebook\)/).waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(op, '08-admin-node');

  step = "admin drains the node holding alice's allocation";
  const nodeId = decodeURIComponent(new URL(op.url()).pathname.split('/').pop());
  const onNodeRow = op.locator(`table.node-allocations tr[data-allocation="${allocId}"]`);
  await onNodeRow.waitFor({ timeout: STEP_TIMEOUT_MS });
  const onNodeText = await onNodeRow.textContent();
  check(/notebook/.test(onNodeText) && /acme/.test(onNodeText) && onNodeText.includes(projectName) && /1g\.5gb/.test(onNodeText),
        `"Allocations on this node" shows alice's allocation as: ${onNodeText}`);
  const drainButton = op.getByRole('button', { name: 'Drain', exact: true });
  const drainDialog = op.getByRole('dialog', { name: `Drain node ${heldNode}?` });
  const focusInDialog = () => op.evaluate(() => !!document.activeElement?.closest('dialog[open]'));
  // Escape cancels and focus goes back to the Drain button.
  await drainButton.click();
  await drainDialog.waitFor({ timeout: STEP_TIMEOUT_MS });
  check(await focusInDialog(), 'focus did not move into the drain confirmation');
  await op.keyboard.press('Escape');
  await drainDialog.waitFor({ state: 'detached', timeout: 5000 });
  check(await op.evaluate(() => document.activeElement?.textContent === 'Drain'), 'after Escape focus is not back on the Drain button');
  await op.keyboard.press('Enter');
  await drainDialog.waitFor({ timeout: STEP_TIMEOUT_MS });
  check(await focusInDialog(), 'focus did not move into the drain confirmation');
  check(await drainDialog.locator(`tr[data-allocation="${allocId}"]`).count() === 1,
        `the drain confirmation does not list alice's allocation ${allocId}: ${await drainDialog.textContent()}`);
  const drainReason = 'e2e: swap a riser card';
  await drainDialog.getByLabel('Reason (optional)').fill(drainReason);
  await shot(op, '08b-admin-node-drain-confirm');
  const drainAnswer = op.waitForResponse((r) => r.url().endsWith(`/v1/nodes/${encodeURIComponent(nodeId)}/drain`) &&
                                         r.request().method() === 'POST', { timeout: STEP_TIMEOUT_MS });
  await drainDialog.getByRole('button', { name: `Drain ${heldNode}`, exact: true }).click();
  const drained = await drainAnswer;
  check(drained.status() === 200, `the drain answered ${drained.status()}: ${await drained.text().catch(() => '')}`);
  await drainDialog.waitFor({ state: 'detached', timeout: 5000 });
  await op.locator('.notice.success').filter({ hasText: `Node ${heldNode} drained` }).waitFor({ timeout: STEP_TIMEOUT_MS });
  await op.waitForFunction((name) => (document.getElementById('status')?.textContent ?? '').includes(`Node ${name} drained`),
                           heldNode, { timeout: 5000 });
  await idle(op);
  const stateBadge = (await op.getByTestId('node-state').textContent()).trim();
  // Alice's allocation is still on it, so the drain waits for it (docs/fleet.md).
  check(/^draining\b/.test(stateBadge), `after the drain the node's state reads "${stateBadge}"`);
  check(await onNodeRow.count() === 1, "alice's allocation is gone from the node's allocations after the drain");
  const apiNode = await admin('GET', `/v1/nodes/${encodeURIComponent(nodeId)}`);
  check(apiNode.state === 'draining' && apiNode.state_reason === drainReason && !apiNode.schedulable,
        `after the drain GET /v1/nodes/${nodeId} says state=${apiNode.state} reason="${apiNode.state_reason}" schedulable=${apiNode.schedulable}`);
  await shot(op, '08c-admin-node-drained');
  // Resume puts it back (nothing later needs it, but the fleet is left as it was).
  await op.getByRole('button', { name: 'Resume', exact: true }).click();
  await op.locator('.notice.success').filter({ hasText: `Node ${heldNode} resumed` }).waitFor({ timeout: STEP_TIMEOUT_MS });
  const resumed = await admin('GET', `/v1/nodes/${encodeURIComponent(nodeId)}`);
  check(resumed.state === 'ready', `after Resume the node is ${resumed.state}`);

  step = 'tenants page';
  await nav(op, 'Tenants', 'Tenants');
  await idle(op);
  for (const t of ['acme', 'beta'])
    await op.locator('tbody tr').filter({ hasText: t }).first().waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(op, '09-admin-tenants');
  await op.getByRole('link', { name: 'Posture of acme' }).click();
  await heading(op, 'Posture of acme');
  await idle(op);
  await shot(op, '10-admin-posture');
  if (jobs) await operatorJobPages(kit, { page: op, jobs });

  step = 'audit page';
  await nav(op, 'Audit trail', 'Audit trail');
  await idle(op);
  const verified = op.getByTestId('audit-verify');
  await verified.waitFor({ timeout: STEP_TIMEOUT_MS });
  check(await verified.getAttribute('data-ok') === 'true', `audit verification: ${await verified.textContent()}`);
  const firstSeq = Number(await op.locator('tbody tr th').first().textContent());
  const next = op.getByRole('button', { name: 'Next page' });
  check(await next.isEnabled(), 'the audit trail has more than 50 records but no enabled Next page button');
  await shot(op, '11-admin-audit');
  await next.click();
  await op.locator('.page-no', { hasText: 'Page 2' }).waitFor({ timeout: STEP_TIMEOUT_MS });
  await idle(op);
  const secondSeq = Number(await op.locator('tbody tr th').first().textContent());
  await shot(op, '11b-admin-audit-page-2');
  check(secondSeq !== firstSeq && secondSeq > 0, `page 2 starts at record ${secondSeq}, page 1 at ${firstSeq}`);
  await op.getByRole('button', { name: 'Previous page' }).click();
  await op.locator('.page-no', { hasText: 'Page 1' }).waitFor({ timeout: STEP_TIMEOUT_MS });
  if (!SKIP.has('insight')) await operatorInsightPages(kit, { page: op, admin, tenants: { acme, beta } });

  step = 'deep link and history';
  await op.goto(`${base}/console/tenants`);
  await heading(op, 'Tenants');
  await op.goBack();
  await heading(op, 'Audit trail');

  step = 'logout';
  await op.getByRole('button', { name: 'Log out' }).click();
  await heading(op, 'Sign in to gpuplane');
  await op.getByText('You are logged out.').first().waitFor({ timeout: STEP_TIMEOUT_MS });
  await shot(op, '12-admin-logged-out');
  const after = await op.evaluate(async () => (await fetch('/v1/whoami')).status);
  check(after === 401, `after logout /v1/whoami answers ${after}`);
  await op.goto(`${base}/console/fleet`);
  await heading(op, 'Sign in to gpuplane');

  step = 'no page problems and no accessibility violations';
  const inaccessible = axeFindings.filter((v) => AXE_FAILING.has(v.impact));
  check(problems.length === 0 && inaccessible.length === 0, [
    problems.length ? `the pages reported problems:\n  ${problems.join('\n  ')}` : '',
    inaccessible.length ? `axe-core found ${inaccessible.length} serious or critical accessibility violations ` +
      `(details in ${path.join(ARTIFACTS, 'axe-violations.json')}):\n  ${inaccessible.map(describeFinding).join('\n  ')}` : '',
  ].filter(Boolean).join('\n'));
  await browser.close();
  browser = null;
}

try {
  await main();
  await stopChildren();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
  log(`PASS (${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots in ${ARTIFACTS})`);
  process.exit(0);
} catch (err) {
  console.error(`\nFAIL at step "${step}": ${err?.stack || err}`);
  for (const c of children) {
    const text = c.logText?.() ?? '';
    if (text) console.error(`\n--- last lines of ${c.procName} (full log in ${ARTIFACTS}/${c.procName}.log) ---\n${text.split('\n').slice(-25).join('\n')}`);
  }
  try {
    if (browser) {
      for (const [c, ctx] of browser.contexts().entries())
        for (const [i, page] of ctx.pages().entries())
          await page.screenshot({ path: path.join(ARTIFACTS, `failure-context${c}-page${i}.png`), fullPage: true }).catch(() => {});
      await browser.close();
    }
  } catch {
    // the failure above is what matters
  }
  await stopChildren();
  if (workDir) console.error(`(work directory kept: ${workDir})`);
  process.exit(1);
}
