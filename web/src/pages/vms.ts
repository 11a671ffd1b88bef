// A tenant's GPU VMs (docs/vms.md): each VM's desired and reported state, node and addresses;
// start, stop and reboot after a confirmation; and the serial console, read through the node's
// agent (each read is in the audit trail).
import { describeError, get, list, post, seg } from '../api';
import { confirmDialog } from '../dialog';
import { h, replace } from '../dom';
import { badge, time } from '../format';
import type { RouteContext } from '../router';
import type { Session } from '../session';
import { announce, errorBox, loading, successBox } from '../status';
import { pagedTable } from '../table';
import type { Vm, VmConsole } from '../types';

const CONSOLE_WAIT_MS = 30_000;
const CONSOLE_POLL_MS = 1_000;

function stateBadge(vm: Vm): HTMLElement {
  const tone = vm.state === 'running' ? 'ok'
    : vm.state === 'failed' || vm.state === 'crashed' ? 'bad'
    : vm.state === 'destroyed' ? 'neutral' : 'warn';
  return badge(vm.state, tone);
}

export async function renderVms(ctx: RouteContext, sess: Session): Promise<void> {
  const tenant = sess.tenant;
  ctx.main.append(h('h1', null, 'Virtual machines'));
  if (!tenant) {
    ctx.main.append(h('p', { class: 'empty' }, 'You do not belong to a tenant, so you have no VMs here.'));
    return;
  }
  const base = `/v1/tenants/${seg(tenant.id)}/vms`;
  const result = h('div', { class: 'result-slot', 'aria-live': 'polite' });
  const consoleSlot = h('section', { class: 'vm-console', 'aria-labelledby': 'console-heading', hidden: true });

  const act = (vm: Vm, action: 'start' | 'stop' | 'reboot', trigger: HTMLElement): void => {
    const verb = action === 'stop' ? 'Shut down' : action === 'start' ? 'Start' : 'Reboot';
    document.body.append(confirmDialog<Vm>({
      title: `${verb} ${vm.domain}?`,
      description: action === 'stop'
        ? 'The guest is asked to power off (ACPI) at the node agent\'s next heartbeat, and powered off if it ignores that.'
        : `The node's agent will ${action} the VM at its next heartbeat.`,
      confirmLabel: `${verb} ${vm.domain}`,
      cancelled: `${verb} cancelled.`,
      failure: `Could not ${action} ${vm.domain}`,
      trigger,
      testId: `vm-${action}-dialog`,
      run: () => post<Vm>(`${base}/${seg(vm.id)}/actions`, { action }),
      done: (v) => {
        replace(result, successBox(`${v.domain}: ${action} requested (desired ${v.desired}).`));
        void table.refresh();
      },
    }));
  };

  const showConsole = async (vm: Vm, trigger: HTMLButtonElement): Promise<void> => {
    trigger.disabled = true;
    consoleSlot.hidden = false;
    const heading = h('h2', { id: 'console-heading', tabindex: -1 }, `Serial console of ${vm.domain}`);
    replace(consoleSlot, heading, loading('the console (asking the node agent)'));
    heading.focus();
    try {
      let capture = await post<VmConsole>(`${base}/${seg(vm.id)}/console`);
      const deadline = Date.now() + CONSOLE_WAIT_MS;
      while (!capture.current && Date.now() < deadline && !ctx.signal.aborted) {
        await new Promise((resolve) => setTimeout(resolve, CONSOLE_POLL_MS));
        capture = await get<VmConsole>(`${base}/${seg(vm.id)}/console`, undefined, { signal: ctx.signal });
      }
      if (ctx.signal.aborted) return;
      replace(consoleSlot, heading,
        h('p', { class: capture.current ? 'hint' : 'notice warning' },
          capture.current
            ? ['Captured ', time(capture.captured_at), ' (the last 16 KiB). Reading the console is recorded in the audit trail.']
            : ['The node agent has not answered yet; showing the capture of ', time(capture.captured_at, 'never'), '.']),
        h('pre', { class: 'console-text', tabindex: 0, 'aria-label': `Console output of ${vm.domain}`,
                   'data-testid': 'vm-console' }, capture.text || '(no output yet)'));
      announce(capture.current ? `Console of ${vm.domain} shown.` : `The console of ${vm.domain} is not current.`);
    } catch (err) {
      if (!ctx.signal.aborted) replace(consoleSlot, heading, errorBox(`Could not read the console: ${describeError(err)}`));
    } finally {
      trigger.disabled = false;
    }
  };

  const actions = (vm: Vm): HTMLElement => {
    if (vm.state === 'destroyed') return h('span', { class: 'hint' }, 'destroyed');
    const buttons: HTMLButtonElement[] = [];
    const button = (label: string, onClick: (b: HTMLButtonElement) => void): void => {
      const b = h('button', { type: 'button', class: 'secondary small', 'aria-label': `${label} ${vm.domain}` }, label);
      b.addEventListener('click', () => onClick(b));
      buttons.push(b);
    };
    if (vm.desired === 'running') {
      button('Reboot', (b) => act(vm, 'reboot', b));
      button('Shut down', (b) => act(vm, 'stop', b));
    } else {
      button('Start', (b) => act(vm, 'start', b));
    }
    button('Console', (b) => void showConsole(vm, b));
    return h('div', { class: 'row-actions' }, buttons);
  };

  const table = pagedTable<Vm>({
    caption: `VMs of ${tenant.name}`,
    empty: 'No VMs. An allocation of an offering delivered as a VM gets one on each of its nodes.',
    pageSize: 50,
    signal: ctx.signal,
    rowKey: (v) => v.id,
    fetchPage: (after, limit) => list<Vm>(base, after, limit),
    columns: [
      { header: 'Domain', rowHeader: true, cell: (v) => [h('span', { class: 'name' }, v.domain), h('div', { class: 'mono small' }, v.id)] },
      { header: 'State', cell: (v) => [stateBadge(v), v.error ? h('div', { class: 'reason' }, v.error) : null] },
      { header: 'Desired', cell: (v) => v.desired },
      { header: 'Addresses', cell: (v) => v.addresses.length ? h('span', { class: 'mono' }, v.addresses.join(', ')) : '—' },
      { header: 'Allocation', cell: (v) => h('span', { class: 'mono' }, v.allocation_id) },
      { header: 'Node', cell: (v) => h('span', { class: 'mono' }, v.node_id) },
      { header: 'Updated', cell: (v) => time(v.updated_at) },
      { header: 'Actions', cell: actions },
    ],
  });
  ctx.main.append(h('p', { class: 'hint' },
    'Log in to a VM with SSH at its address, with the keys set for the tenant (gpuplane ssh-key set). ' +
    'Power actions and console reads are carried out by the node\'s agent at its next heartbeat.'),
    result, table.element, consoleSlot);
  await table.reload();
}
