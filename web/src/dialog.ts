// The confirmation asked before an action that changes or removes something (drain a node,
// revoke a role): a modal <dialog> named by its heading and described by what confirming does.
// showModal() keeps focus inside and makes the page behind inert; Escape or Cancel closes it and
// focus goes back to the button that opened it. A refused action leaves it open with the reason.
import { describeError } from './api';
import { h, replace, uid, type Child } from './dom';
import { announce, errorBox } from './status';

export interface ConfirmOptions<T> {
  /** The question, the dialog's accessible name: "Drain node gpu-node-1?". */
  title: string;
  /** What confirming does, read out with the name (aria-describedby). */
  description: string;
  /** What else the user should see or fill in before confirming: affected objects, a reason. */
  body?: Child;
  /** The confirm button's text, naming the action and its object: "Drain gpu-node-1". */
  confirmLabel: string;
  /** The other button's text, "Cancel" unless that would read as the action itself. */
  dismissLabel?: string;
  /** Said through the live region when the dialog is cancelled: "Drain cancelled.". */
  cancelled: string;
  /** The start of the error shown when `run` fails: "Could not drain node gpu-node-1". */
  failure: string;
  /** The button that opened the dialog: focus returns to it when the dialog is cancelled. */
  trigger: HTMLElement;
  /** Where focus goes on opening; the Cancel button (the harmless choice) by default. */
  initialFocus?: HTMLElement;
  testId?: string;
  /** The action; while it runs both buttons are disabled and Escape is ignored. */
  run: () => Promise<T>;
  /** After `run` succeeded and the dialog closed (so focus may move to a notice). */
  done: (value: T) => void;
}

/** Opens the confirmation as a modal dialog; it removes itself when it closes. */
export function confirmDialog<T>(options: ConfirmOptions<T>): HTMLDialogElement {
  const titleId = uid('dialog-title');
  const descId = uid('dialog-desc');
  const error = h('div');
  const confirm = h('button', { type: 'button', class: 'danger' }, options.confirmLabel);
  const cancel = h('button', { type: 'button', class: 'secondary' }, options.dismissLabel ?? 'Cancel');
  const dialog = h('dialog', { class: 'confirm-dialog', 'aria-labelledby': titleId, 'aria-describedby': descId,
                               'data-testid': options.testId },
    h('h2', { id: titleId }, options.title),
    h('p', { id: descId }, options.description),
    options.body,
    error,
    h('div', { class: 'dialog-actions' }, confirm, cancel));

  let busy = false;
  const close = (focusTo: HTMLElement | null): void => {
    if (dialog.open) dialog.close();
    dialog.remove();
    focusTo?.focus();
  };
  const dismiss = (): void => {
    close(options.trigger);
    announce(options.cancelled);
  };
  dialog.addEventListener('cancel', (e) => {
    // Escape: closed here rather than by the browser, so the dialog is removed and focus returns.
    e.preventDefault();
    if (!busy) dismiss();
  });
  cancel.addEventListener('click', dismiss);
  confirm.addEventListener('click', () => {
    busy = true;
    confirm.disabled = true;
    cancel.disabled = true;
    replace(error);
    options.run().then((value) => {
      busy = false;
      close(null);
      options.done(value);
    }, (err: unknown) => {
      busy = false;
      confirm.disabled = false;
      cancel.disabled = false;
      replace(error, errorBox(`${options.failure}: ${describeError(err)}`));
      confirm.focus();
    });
  });

  // Inside <main>, so navigating away removes it with the page (and a list redrawn behind it
  // does not take it along).
  (options.trigger.closest('main') ?? document.body).append(dialog);
  dialog.showModal();
  (options.initialFocus ?? cancel).focus();
  return dialog;
}
