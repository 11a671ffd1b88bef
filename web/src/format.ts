// How values read on screen: times in the viewer's zone (UTC ISO in the title), sizes, states.
import { h } from './dom';

const localFormat = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  timeZoneName: 'short',
});

/** A <time> in the viewer's zone, with the UTC ISO time as its title and datetime. */
export function time(iso: string | null | undefined, empty = '—'): HTMLElement | string {
  if (!iso) return empty;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const utc = d.toISOString();
  return h('time', { datetime: utc, title: utc }, localFormat.format(d));
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function bytes(n: number): string {
  if (!Number.isFinite(n) || n <= 0) return '0 B';
  let v = n;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${UNITS[i]}`;
}

/** A state as a badge; the text itself says the state (colour is only a second cue). */
export function badge(state: string, tone?: 'ok' | 'warn' | 'bad' | 'neutral'): HTMLElement {
  const t = tone ?? toneOf(state);
  return h('span', { class: `badge badge-${t}` }, state.replace(/_/g, ' '));
}

function toneOf(state: string): 'ok' | 'warn' | 'bad' | 'neutral' {
  switch (state) {
    case 'active':
    case 'ready':
    case 'healthy':
    case 'placed':
    case 'success':
    case 'pass':
      return 'ok';
    case 'pending':
    case 'draining':
    case 'maintenance':
    case 'enrolling':
    case 'suspended':
    case 'expired':
    case 'preempted':
    case 'throttled':
      return 'warn';
    case 'failed':
    case 'unhealthy':
    case 'revoked':
    case 'denied':
    case 'failure':
    case 'fail':
    case 'offboarding':
      return 'bad';
    default:
      return 'neutral';
  }
}

/** "1 project" / "3 projects". */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
