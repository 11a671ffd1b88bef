// A tenant's members, invoices, budgets and posture (called from console_test.mjs for alice, the
// admin of acme who holds a placed MIG allocation by now, and for bob, the admin of beta).
//
// The platform admin's API client seeds what the pages show: a rate card pricing alice's offering
// (so her allocation's minutes cost something), a 10% tax rate, each tenant's draft invoice for
// this month, acme's tenant-wide budget of $100 whose first threshold (0.01%, a cent) her spend has passed, and a user
// (carol) for alice to grant a role to. Then, as each admin:
//   - Members: the admin is listed with tenant-admin and the binding's source oidc:test (synced at
//     each login, so no Revoke button); alice grants tenant-billing to carol after a refused
//     form (project role without a project) and sees the API's refusal of a duplicate grant,
//     then revokes it in the confirmation dialog (Escape cancels first; focus comes back);
//   - Invoices: the list, the invoice with its total as the API computed it, the Print button
//     (window.print) and the print stylesheet (no navigation, no buttons);
//   - Budgets: the seeded budget's spend and progress bar, its alert; alice sets a project budget
//     (a bad threshold list is refused first), changes the tenant-wide one and deletes the project
//     one after the confirmation;
//   - Posture: the report's layers, without the operators' breadcrumb.

/** "2026-12": invoices and budgets are per UTC calendar month. */
function thisMonth() {
  return new Date().toISOString().slice(0, 7);
}

// What the pages price: alice's allocation uses offering a100-mig-1g (console_test.mjs seed()),
// her VM (released before these pages) offering a100-vm, her job that runs (after these pages,
// job_pages.mjs) offering a100-pool.
const RATE_CARD = {
  id: 'default', currency: 'USD', effective_from: '2020-01-01T00:00:00Z',
  // 3600 USD per GPU-equivalent-hour: a 1g.5gb instance (a seventh) costs about 0.14 USD a second,
  // so a minute of alice's allocation is a visible amount.
  prices: [{ offering: 'a100-mig-1g', unit_price_micros: 3_600_000_000 },
           { offering: 'a100-vm', unit_price_micros: 3_600_000_000 },
           { offering: 'a100-pool', unit_price_micros: 3_600_000_000 }],
};

async function seedBilling(admin, tenant, withBudget) {
  const card = await admin('GET', '/v1/rate-cards/default', undefined, { expect: [200, 404] });
  if (!card?.latest) await admin('POST', '/v1/rate-cards', RATE_CARD);
  await admin('PUT', `/v1/tenants/${tenant.name}/billing-account`, { rate_card: 'default', tax_bps: 1000 });
  const invoice = await admin('POST', `/v1/tenants/${tenant.name}/invoices`, { period: thisMonth() }, { expect: [200, 201] });
  if (withBudget)
    await admin('PUT', `/v1/tenants/${tenant.name}/budgets/-`, { amount_micros: 100_000_000, thresholds_bps: [1, 5000, 10000] });
  return invoice;
}

/** The amount as the page's own locale writes it (Intl, half to even), from exact micros. */
async function usd(page, micros) {
  const abs = Math.abs(micros);
  const decimal = `${micros < 0 ? '-' : ''}${Math.trunc(abs / 1e6)}.${String(abs % 1e6).padStart(6, '0')}`;
  return page.evaluate((d) => new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD', roundingMode: 'halfEven' })
    .format(d), decimal);
}

export async function tenantAccountPages(kit, { page, admin, tenant, who }) {
  const { log, check, shot, heading, nav, idle, setStep, timeout } = kit;
  const isAlice = who === 'alice';
  const shotName = (n, what) => isAlice ? `${n}-alice-${what}` : `35-bob-${what}`;
  const focusedLabel = () => page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? '');
  const focusInDialog = () => page.evaluate(() => !!document.activeElement?.closest('dialog[open]'));

  setStep(`${who}'s account pages: seed billing`);
  const invoice = await seedBilling(admin, tenant, isAlice);
  if (isAlice) {
    check(invoice.total_micros > 0, `acme's draft invoice costs nothing (${invoice.total}): alice's allocation was not priced`);
    await admin('POST', `/v1/tenants/${tenant.name}/users`, { username: 'carol', display_name: 'Carol Ops' });
  }

  // ---- Members ------------------------------------------------------------------------------
  setStep(`${who} sees the members and where their roles came from`);
  await nav(page, 'Members', 'Members');
  await idle(page);
  const userRow = (name) => page.locator('tbody tr', { has: page.locator('th .name', { hasText: new RegExp(`^${name}$`) }) });
  const ownBinding = userRow(who).locator('li[data-role="tenant-admin"]');
  await ownBinding.waitFor({ timeout });
  const ownText = await ownBinding.textContent();
  check(/oidc:test/.test(ownText) && /at each login/.test(ownText), `${who}'s tenant-admin binding reads: ${ownText}`);
  check(await ownBinding.getByRole('button').count() === 0, `${who}'s provider-managed binding offers a Revoke button`);

  if (isAlice) {
    setStep('alice grants carol a role, then revokes it');
    const carol = userRow('carol');
    await carol.waitFor({ timeout });
    check(/no roles/.test(await carol.textContent()), `carol should start without roles: ${await carol.textContent()}`);
    const grant = page.getByRole('button', { name: 'Grant role' });
    const grantForm = page.locator('form[aria-labelledby="grant-heading"]');
    await page.getByLabel('To', { exact: true }).selectOption({ label: 'carol (Carol Ops)' });
    // A project role needs a project: refused in the form, focus on the project field.
    await page.getByLabel('Role', { exact: true }).selectOption('project-viewer');
    await grant.click();
    await grantForm.locator('[role="alert"]').filter({ hasText: 'applies to one project' }).waitFor({ timeout });
    check(await page.evaluate(() => document.activeElement?.getAttribute('name')) === 'project',
          'after the refused grant focus is not on the project field');
    await page.getByLabel('Role', { exact: true }).selectOption('tenant-billing');
    await grant.click();
    await grantForm.locator('.notice.success').filter({ hasText: 'Granted tenant-billing in the whole tenant to carol.' })
      .waitFor({ timeout });
    const carolBinding = carol.locator('li[data-role="tenant-billing"]');
    await carolBinding.waitFor({ timeout });
    check(/Granted through the API/.test(await carolBinding.textContent()), `carol's new binding reads: ${await carolBinding.textContent()}`);
    // The same grant again: the API's refusal is shown as it is.
    await grant.click();
    await grantForm.locator('[role="alert"]').filter({ hasText: 'already exists' }).waitFor({ timeout });
    await shot(page, shotName(30, 'members'));

    const revoke = carolBinding.getByRole('button', { name: 'Revoke tenant-billing from carol' });
    const dialog = page.getByRole('dialog', { name: 'Revoke tenant-billing from carol?' });
    await revoke.click();
    await dialog.waitFor({ timeout });
    check(await focusInDialog(), 'focus did not move into the revoke confirmation');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached', timeout: 5000 });
    check(await focusedLabel() === 'Revoke tenant-billing from carol', 'after Escape focus is not back on the Revoke button');
    await revoke.click();
    await dialog.waitFor({ timeout });
    await shot(page, shotName(30, 'members-revoke'));
    await dialog.getByRole('button', { name: 'Revoke tenant-billing', exact: true }).click();
    await dialog.waitFor({ state: 'detached', timeout: 5000 });
    await page.locator('.notice.success').filter({ hasText: 'Revoked tenant-billing in the whole tenant from carol.' })
      .waitFor({ timeout });
    await carolBinding.waitFor({ state: 'detached', timeout });
    const left = (await admin('GET', `/v1/tenants/${tenant.name}/role-bindings`)).items.filter((b) => b.role === 'tenant-billing');
    check(left.length === 0, `after the revoke the API still lists ${left.length} tenant-billing bindings`);
  } else {
    await shot(page, shotName(35, 'members'));
  }

  // ---- Invoices -----------------------------------------------------------------------------
  setStep(`${who} opens the invoice and its print view`);
  await nav(page, 'Invoices', 'Invoices');
  await idle(page);
  const total = await usd(page, invoice.total_micros);
  const invoiceRow = page.locator(`tbody tr[data-key="${invoice.id}"]`);
  await invoiceRow.waitFor({ timeout });
  const rowText = await invoiceRow.textContent();
  check(rowText.includes(total) && /draft/.test(rowText), `the invoice row reads "${rowText}", wanted a draft of ${total}`);
  if (isAlice) await shot(page, shotName('31a', 'invoices'));
  await invoiceRow.getByRole('link').click();
  await heading(page, `Invoice ${thisMonth()}`);
  await idle(page);
  const totals = page.getByTestId('invoice-totals');
  await totals.waitFor({ timeout });
  const totalsText = await totals.textContent();
  check(totalsText.includes(total) && /Tax \(10%\)/.test(totalsText), `the invoice's totals read: ${totalsText}`);
  if (isAlice) {
    const line = page.locator('table.invoice-lines tbody tr').filter({ hasText: 'a100-mig-1g' });
    check(await line.count() === 1, `alice's invoice has no line for offering a100-mig-1g: ${await page.locator('main').textContent()}`);
    // The Print button prints (the browser's dialog is stubbed out).
    await page.evaluate(() => { window.gpPrinted = 0; window.print = () => { window.gpPrinted += 1; }; });
    await page.getByRole('button', { name: 'Print' }).click();
    check(await page.evaluate(() => window.gpPrinted) === 1, 'the Print button did not call window.print()');
    await shot(page, shotName(31, 'invoice'));
    await page.emulateMedia({ media: 'print' });
    check(!(await page.locator('nav[aria-label="Main"]').isVisible()), 'the printed invoice shows the navigation');
    check(!(await page.getByRole('button', { name: 'Print' }).isVisible()), 'the printed invoice shows the Print button');
    check(await totals.isVisible(), 'the printed invoice hides its totals');
    await shot(page, shotName(32, 'invoice-print'));
    await page.emulateMedia({ media: 'screen' });
  } else {
    await shot(page, shotName(35, 'invoice'));
  }

  // ---- Budgets ------------------------------------------------------------------------------
  setStep(`${who} sees the budgets`);
  await nav(page, 'Budgets', 'Budgets');
  await idle(page);
  if (isAlice) {
    const tenantWide = page.locator('tbody tr[data-key="-"]');
    await tenantWide.waitFor({ timeout });
    const spendValue = Number(await tenantWide.locator('progress').getAttribute('value'));
    const wideText = await tenantWide.textContent();
    check(spendValue > 0 && wideText.includes(await usd(page, 100_000_000)),
          `the tenant-wide budget shows spend ${spendValue}% and reads: ${wideText}`);
    const [apiBudget] = (await admin('GET', `/v1/tenants/${tenant.name}/budgets`)).items;
    check(apiBudget?.spend_micros > 0, `the API says acme spent ${apiBudget?.spend_micros} micros`);
    const alerts = page.locator('section', { has: page.getByRole('heading', { name: 'Alerts fired, oldest first' }) });
    await alerts.locator('tbody tr').filter({ hasText: '0.01%' }).first().waitFor({ timeout });

    setStep('alice sets, changes and deletes budgets');
    const scope = page.getByLabel('For', { exact: true });
    await scope.selectOption({ index: 1 });
    const projectId = await scope.inputValue();
    await page.getByLabel('Limit a month').fill('300');
    await page.getByLabel('Alert thresholds (%)').fill('80, 50');
    await page.getByRole('button', { name: 'Save budget' }).click();
    await page.locator('form [role="alert"]').filter({ hasText: 'Thresholds must go up' }).waitFor({ timeout });
    await page.getByLabel('Alert thresholds (%)').fill('0.01, 80');
    await page.getByRole('button', { name: 'Save budget' }).click();
    const projectRow = page.locator(`tbody tr[data-key="${projectId}"]`);
    await projectRow.waitFor({ timeout });
    check((await projectRow.textContent()).includes(await usd(page, 300_000_000)), `the project budget reads: ${await projectRow.textContent()}`);
    await page.getByRole('button', { name: 'Change the budget of the whole tenant' }).click();
    check(await page.getByLabel('Limit a month').inputValue() === '100', 'Change did not put the budget into the form');
    await page.getByLabel('Limit a month').fill('200');
    await page.getByRole('button', { name: 'Save budget' }).click();
    await tenantWide.filter({ hasText: await usd(page, 200_000_000) }).waitFor({ timeout });
    await shot(page, shotName(33, 'budgets'));
    const remove = projectRow.getByRole('button', { name: /^Delete the budget of project / });
    await remove.click();
    const dialog = page.getByTestId('delete-budget-dialog');
    await dialog.waitFor({ timeout });
    await dialog.getByRole('button', { name: 'Delete budget' }).click();
    await projectRow.waitFor({ state: 'detached', timeout });
    await page.locator('.notice.success').filter({ hasText: 'is deleted' }).waitFor({ timeout });
  } else {
    await page.getByText('No budgets yet.').waitFor({ timeout });
    await shot(page, shotName(35, 'budgets'));
  }

  // ---- Posture ------------------------------------------------------------------------------
  setStep(`${who} reads the tenant's posture`);
  await nav(page, 'Posture', 'Posture');
  await heading(page, `Posture of ${tenant.name}`);
  await idle(page);
  const layers = await page.locator('main section[aria-label^="Layer "]').count();
  check(layers >= 3, `the posture page shows ${layers} layers`);
  check(await page.locator('main .breadcrumb').count() === 0, 'the tenant posture page shows the operators\' breadcrumb');
  await shot(page, shotName(34, 'posture'));
  log(`${who}: members, invoice, budgets and posture pages checked`);
}
