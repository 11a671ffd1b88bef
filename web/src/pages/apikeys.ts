// API keys: create one (its secret is shown once, in a panel to copy it from), list them, revoke.
import { del, describeError, list, post, seg } from '../api';
import { field, h, replace } from '../dom';
import { badge, time } from '../format';
import type { RouteContext } from '../router';
import type { Session } from '../session';
import { announce, checkLabel, errorBox, successBox } from '../status';
import { pagedTable } from '../table';
import type { ApiKey, CreatedApiKey } from '../types';

const TTLS: [string, number | null][] = [
  ['30 days', 30 * 86400],
  ['90 days', 90 * 86400],
  ['1 year', 365 * 86400],
  ['never (not recommended)', null],
];

async function copy(text: string, source: HTMLElement): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No clipboard API (an insecure origin): select the text so Ctrl+C copies it.
    const range = document.createRange();
    range.selectNodeContents(source);
    const sel = window.getSelection();
    sel?.removeAllRanges();
    sel?.addRange(range);
    return false;
  }
}

function secretPanel(key: CreatedApiKey, onDismiss: () => void): HTMLElement {
  const code = h('code', { class: 'secret', 'data-testid': 'api-key-secret' }, key.token);
  const copied = h('span', { class: 'copied', 'aria-live': 'polite' });
  const headingId = 'secret-heading';
  const panel = h('section', { class: 'secret-panel', 'aria-labelledby': headingId, 'data-testid': 'secret-panel' },
    h('h2', { id: headingId, tabindex: -1 }, `Your new API key “${key.name}”`),
    h('p', null, h('strong', null, 'Copy it now: it is shown only this once. '),
      'gpuplane keeps only a hash of it, so it cannot be shown again; if it is lost, revoke it and create another.'),
    h('div', { class: 'secret-row' }, code,
      h('button', { type: 'button', onClick: () => {
        void copy(key.token, code).then((ok) => {
          copied.textContent = ok ? 'Copied to the clipboard.' : 'Selected: press Ctrl+C to copy.';
        });
      } }, 'Copy')),
    copied,
    h('p', null, 'Use it as ', h('code', null, 'Authorization: Bearer <key>'), ' or ', h('code', null, 'GPUPLANE_TOKEN'), '.'),
    h('button', { type: 'button', class: 'secondary', onClick: () => {
      code.textContent = '';
      panel.remove();
      onDismiss();
    } }, 'I have stored it — hide the key'));
  return panel;
}

export async function renderApiKeys(ctx: RouteContext, sess: Session): Promise<void> {
  const p = sess.principal;
  const base = sess.tenant ? `/v1/tenants/${seg(sess.tenant.id)}/api-keys` : '/v1/api-keys';
  ctx.main.append(h('h1', null, 'API keys'),
    h('p', { class: 'lead' }, 'Keys for the CLI and automation. A key acts with your roles.'));

  const secretSlot = h('div', { class: 'secret-slot' });
  const result = h('div', { class: 'result-slot' });
  const name = h('input', { name: 'name', required: true, maxlength: 63, autocomplete: 'off',
                            pattern: '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?', spellcheck: 'false' });
  const ttl = h('select', { name: 'ttl' }, TTLS.map(([label, secs], i) =>
    h('option', { value: secs === null ? '' : String(secs), selected: i === 1 }, label)));
  const submit = h('button', { type: 'submit' }, 'Create key');
  const form = h('form', { class: 'inline-form', 'aria-labelledby': 'create-key-heading' },
    h('h2', { id: 'create-key-heading' }, 'Create a key'),
    field('Name', name, 'A DNS label saying what the key is for, for example ci or laptop.'),
    field('Expires after', ttl), submit, result);

  const table = pagedTable<ApiKey>({
    caption: 'Keys',
    empty: 'No API keys yet.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (k) => k.id,
    fetchPage: (after, limit) => list<ApiKey>(base, after, limit),
    columns: [
      { header: 'Name', rowHeader: true, cell: (k) => h('span', { class: 'name' }, k.name) },
      { header: 'ID', cell: (k) => h('span', { class: 'mono' }, k.id) },
      { header: 'Owner', cell: (k) => k.owner_id === p.id ? 'you' : h('span', { class: 'mono' }, `${k.owner_kind} ${k.owner_id}`) },
      { header: 'State', cell: (k) => badge(k.state) },
      { header: 'Created', cell: (k) => time(k.created_at) },
      { header: 'Expires', cell: (k) => time(k.expires_at, 'never') },
      { header: 'Actions', cell: (k) => k.state === 'active' ? revokeControl(k) : k.revoked_at ? ['revoked ', time(k.revoked_at)] : '—' },
    ],
  });

  // Two steps, so a stray keypress revokes nothing.
  function revokeControl(k: ApiKey): HTMLElement {
    const slot = h('div', { class: 'row-actions' });
    const ask = h('button', { type: 'button', class: 'danger', 'aria-label': `Revoke key ${k.name}` }, 'Revoke');
    ask.addEventListener('click', () => {
      const confirm = h('button', { type: 'button', class: 'danger', 'aria-label': `Confirm: revoke key ${k.name}` }, 'Confirm revoke');
      const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
      cancel.addEventListener('click', () => {
        replace(slot, ask);
        ask.focus();
      });
      confirm.addEventListener('click', () => {
        confirm.disabled = true;
        void (async () => {
          try {
            await del(`${base}/${seg(k.id)}`);
            replace(result, successBox(`Key ${k.name} revoked.`));
            // The row's buttons are redrawn: keep the keyboard at the list.
            await table.refresh();
            table.element.querySelector<HTMLElement>('h2')?.focus();
          } catch (err) {
            confirm.disabled = false;
            replace(result, errorBox(`Could not revoke ${k.name}: ${describeError(err)}`));
          }
        })();
      });
      replace(slot, h('span', null, 'Revoke? '), confirm, ' ', cancel);
      confirm.focus();
    });
    slot.append(ask);
    return slot;
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    void (async () => {
      replace(result);
      if (!checkLabel(name, result)) return;
      submit.disabled = true;
      try {
        const body: Record<string, string | number> = { name: name.value.trim() };
        if (ttl.value) body.ttl_seconds = Number(ttl.value);
        const key = await post<CreatedApiKey>(base, body);
        name.value = '';
        const panel = secretPanel(key, () => {
          announce('The key is hidden.');
          name.focus();
        });
        replace(secretSlot, panel);
        panel.querySelector<HTMLElement>('h2')?.focus();
        announce(`Key ${key.name} created. Copy it now: it is shown only once.`);
        await table.reload();
      } catch (err) {
        replace(result, errorBox(`Could not create the key: ${describeError(err)}`));
        name.focus();
      } finally {
        submit.disabled = false;
      }
    })();
  });

  ctx.main.append(secretSlot, form, table.element);
  await table.reload();
}
