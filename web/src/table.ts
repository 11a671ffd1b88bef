// A list the API pages with `next` cursors, drawn as a table with Previous / Next buttons and its
// loading, empty and error states. Previous pages are remembered by their cursors.
import { describeError } from './api';
import { h, replace, scrollBox, uid, type Child } from './dom';
import { announce, errorBox, loading } from './status';
import type { Page } from './types';

export interface Column<T> {
  header: string;
  cell: (row: T) => Child;
  /** Row header cell (th scope=row) rather than td. */
  rowHeader?: boolean;
  className?: string;
}

export interface PagedTableOptions<T> {
  caption: string;
  columns: Column<T>[];
  fetchPage: (after: string | null, limit: number) => Promise<Page<T>>;
  /** What to say when there is nothing. */
  empty: string;
  pageSize?: number;
  signal?: AbortSignal;
  rowKey?: (row: T) => string;
}

export interface PagedTable {
  element: HTMLElement;
  /** Reloads from the first page. */
  reload: () => Promise<void>;
  /** Reloads the page shown now. */
  refresh: () => Promise<void>;
}

export function pagedTable<T>(options: PagedTableOptions<T>): PagedTable {
  const limit = options.pageSize ?? 50;
  const captionId = uid('caption');
  const body = h('div', { class: 'table-body' });
  const pager = h('nav', { class: 'pager', 'aria-label': `${options.caption}: pages` });
  const heading = h('h2', { id: captionId, tabindex: -1 }, options.caption);
  const element = h('section', { class: 'paged-table', 'aria-labelledby': captionId },
                    heading, body, pager);
  // cursors[i] is the `after` of page i (null for the first page).
  let cursors: (string | null)[] = [null];
  let index = 0;
  let generation = 0;

  async function show(i: number, announcePage: boolean): Promise<void> {
    const mine = ++generation;
    index = i;
    replace(body, loading(options.caption.toLowerCase()));
    replace(pager);
    let page: Page<T>;
    try {
      page = await options.fetchPage(cursors[i] ?? null, limit);
    } catch (err) {
      if (mine !== generation || options.signal?.aborted) return;
      replace(body, errorBox(`Could not load ${options.caption.toLowerCase()}: ${describeError(err)}`,
                             h('button', { type: 'button', onClick: () => void show(i, true) }, 'Retry')));
      return;
    }
    if (mine !== generation || options.signal?.aborted) return;
    cursors = cursors.slice(0, i + 1);
    if (page.next) cursors.push(page.next);
    if (page.items.length === 0) {
      replace(body, h('p', { class: 'empty' }, i === 0 ? options.empty : 'No more items.'));
    } else {
      const table = h('table', null,
        h('caption', { class: 'visually-hidden' }, options.caption),
        h('thead', null, h('tr', null, options.columns.map((c) =>
          h('th', { scope: 'col', class: c.className }, c.header)))),
        h('tbody', null, page.items.map((row) => h('tr', options.rowKey ? { 'data-key': options.rowKey(row) } : null,
          options.columns.map((c) => c.rowHeader
            ? h('th', { scope: 'row', class: c.className }, c.cell(row))
            : h('td', { class: c.className }, c.cell(row)))))));
      replace(body, scrollBox(table));
    }
    const hasPrev = i > 0;
    const hasNext = page.next !== null && page.next !== undefined;
    if (hasPrev || hasNext) {
      replace(pager,
        h('button', { type: 'button', disabled: !hasPrev, onClick: () => void show(index - 1, true) },
          'Previous page'),
        h('span', { class: 'page-no' }, `Page ${i + 1}`),
        h('button', { type: 'button', disabled: !hasNext, onClick: () => void show(index + 1, true) },
          'Next page'));
    }
    if (announcePage) {
      // The pressed button was redrawn: keep the keyboard user at the top of the list.
      heading.focus();
      announce(`${options.caption}, page ${i + 1}: ${page.items.length} shown${hasNext ? ', more on the next page' : ''}.`);
    }
  }

  return {
    element,
    reload: () => {
      cursors = [null];
      return show(0, false);
    },
    refresh: () => show(index, false),
  };
}

/**
 * A `fetchPage` for pagedTable over a list the API returns in one answer: the first page loads
 * it (so Retry and reload ask the server again), later pages are slices; the cursor is the offset.
 */
export function pagesOf<T>(load: () => Promise<T[]>): (after: string | null, limit: number) => Promise<Page<T>> {
  let items: T[] = [];
  return async (after, limit) => {
    if (after === null) items = await load();
    const start = Number(after ?? 0);
    const end = start + limit;
    return { items: items.slice(start, end), next: end < items.length ? String(end) : null };
  };
}
