// Messages for screen readers (the page's polite live region) and visible notices for errors.
import { h, type Child } from './dom';

/** Says `message` through the live region; repeated messages are said again. */
export function announce(message: string): void {
  const region = document.getElementById('status');
  if (!region) return;
  region.textContent = '';
  // A changed text node is what screen readers pick up; the frame gap makes a repeat a change.
  requestAnimationFrame(() => {
    region.textContent = message;
  });
}

/** A visible error notice (role=alert, so it is read at once). */
export function errorBox(message: string, ...extra: Child[]): HTMLElement {
  return h('div', { class: 'notice error', role: 'alert' }, h('p', null, message), extra);
}

/** A visible success notice; the message is also announced. */
export function successBox(message: string): HTMLElement {
  announce(message);
  return h('div', { class: 'notice success' }, h('p', null, message));
}

/** A loading placeholder, busy for assistive technology. */
export function loading(what: string): HTMLElement {
  return h('p', { class: 'loading', 'aria-busy': 'true' }, `Loading ${what}…`);
}

/** False, with the reason shown in `slot` and focus on the field, when a DNS-label field is invalid. */
export function checkLabel(input: HTMLInputElement, slot: Element): boolean {
  if (input.checkValidity()) return true;
  slot.replaceChildren(errorBox('The name must be a DNS label: lower-case letters, digits and hyphens, at most 63.'));
  input.focus();
  return false;
}
