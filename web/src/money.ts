// Amounts as the billing API sends them: integer micro-units of an ISO 4217 currency
// (1 USD = 1,000,000; docs/billing.md "Money and rounding"), shown in the viewer's locale.
// Display rounds half to even, as the server's printable invoice does, so both show the same cents.

const MICROS_PER_UNIT = 1_000_000;

/** The exact decimal of `micros` ("-1234.500000"): no binary fraction on the way. */
export function microsToDecimal(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.trunc(abs / MICROS_PER_UNIT);
  const fraction = String(abs % MICROS_PER_UNIT).padStart(6, '0');
  return `${sign}${whole}.${fraction}`;
}

// Intl.NumberFormat formats a decimal string exactly and rounds half to even on request
// (ECMA-402 2023); TypeScript's ES2022 library knows neither, hence the widened types.
type ExactOptions = Intl.NumberFormatOptions & { roundingMode?: 'halfEven' };
type ExactFormat = { format(value: string): string };

const formats = new Map<string, ExactFormat>();

function formatter(key: string, options: ExactOptions): ExactFormat {
  let f = formats.get(key);
  if (!f) {
    f = new Intl.NumberFormat(undefined, { roundingMode: 'halfEven', ...options } as Intl.NumberFormatOptions) as
      unknown as ExactFormat;
    formats.set(key, f);
  }
  return f;
}

/**
 * "$1,234.56" for 1234560000 micros of USD. `precise` keeps up to six decimals (unit prices,
 * which are often fractions of a cent). Without a currency (nothing priced yet) the plain number.
 */
export function money(micros: number, currency: string | null | undefined, precise = false): string {
  const value = microsToDecimal(micros);
  const plain = () => formatter(`plain-${precise}`, { minimumFractionDigits: 2, maximumFractionDigits: precise ? 6 : 2 })
    .format(value);
  if (!currency) return plain();
  try {
    return formatter(`${currency}-${precise}`, { style: 'currency', currency, ...(precise ? { maximumFractionDigits: 6 } : {}) })
      .format(value);
  } catch {
    // A code this browser does not know: the number and the code.
    return `${plain()} ${currency}`;
  }
}

/** A decimal string such as "12.345000" in the viewer's locale, at most six decimals. */
export function decimal(text: string): string {
  return formatter('decimal', { maximumFractionDigits: 6 }).format(text);
}

/** Basis points as a percentage: 8000 is "80%", 1250 is "12.5%". */
export function percentOfBps(bps: number): string {
  return formatter('percent', { style: 'percent', maximumFractionDigits: 2 }).format(String(bps / 10_000));
}

/**
 * Currency units typed by a person ("2500", "2500.50") as micros, exactly; null unless it is a
 * positive amount with at most six decimals that JSON carries without loss (below 2^53 micros).
 */
export function parseUnitsToMicros(text: string): number | null {
  const m = /^(\d{1,10})(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!m) return null;
  const micros = Number(m[1]) * MICROS_PER_UNIT + Number((m[2] ?? '').padEnd(6, '0'));
  return micros > 0 && Number.isSafeInteger(micros) ? micros : null;
}
