// Small DOM builders: every element of the console is made with h() or s(), and text always goes
// in as text nodes (never as HTML), so nothing the API returns can inject markup.

export type Child = Node | string | number | null | undefined | false | readonly Child[];
type AttrValue = string | number | boolean | null | undefined;
export type Attrs = Record<string, AttrValue | EventListener>;

function append(parent: Node, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(parent, c);
    else if (c instanceof Node) parent.appendChild(c);
    else parent.appendChild(document.createTextNode(String(c)));
  }
}

function setAttrs(el: Element, attrs: Attrs | null | undefined): void {
  if (!attrs) return;
  for (const [key, value] of Object.entries(attrs)) {
    if (typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (value === null || value === undefined || value === false) {
      continue;
    } else if (value === true) {
      el.setAttribute(key, '');
    } else if (key === 'value' && 'value' in el) {
      (el as HTMLInputElement).value = String(value);
    } else {
      el.setAttribute(key, String(value));
    }
  }
}

/** An HTML element: h('button', {type: 'button', onClick: f}, 'Save'). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element. */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** Replaces an element's children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

let nextId = 0;
/** A document-unique id for label/aria wiring. */
export function uid(prefix: string): string {
  nextId += 1;
  return `${prefix}-${nextId}`;
}

/** A labelled form field: the label, the control and an optional hint tied by aria-describedby. */
export function field(
  label: string,
  control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
  hint?: string,
): HTMLElement {
  if (!control.id) control.id = uid('field');
  const parts: Child[] = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hintId = `${control.id}-hint`;
    control.setAttribute('aria-describedby', hintId);
    parts.push(h('p', { id: hintId, class: 'hint' }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

/**
 * A table in a box that scrolls what does not fit (wide columns, a narrow window, a long chart
 * table). While it scrolls, the box is a tab stop, so keyboard users can scroll it with the arrow
 * keys too (WCAG 2.1.1; axe's scrollable-region-focusable), named by the table's caption. It is a
 * group rather than a region: most tables sit in a section of that name, and a second landmark
 * named the same would only repeat it. While everything fits, it is neither.
 */
export function scrollBox(table: HTMLTableElement, attrs?: Attrs): HTMLElement {
  const box = h('div', { class: 'table-scroll', ...attrs }, table);
  const label = table.caption?.textContent ?? '';
  const update = (): void => {
    const scrolls = box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight;
    if (scrolls === box.hasAttribute('tabindex')) return;
    if (scrolls) {
      box.tabIndex = 0;
      box.setAttribute('role', 'group');
      box.setAttribute('aria-label', label);
    } else {
      for (const a of ['tabindex', 'role', 'aria-label']) box.removeAttribute(a);
    }
  };
  // The box's size changes with the window (and when it is shown); the table's with its rows.
  const observer = new ResizeObserver(update);
  observer.observe(box);
  observer.observe(table);
  return box;
}
