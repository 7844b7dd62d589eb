/** Markdown building blocks: tables, mermaid bar charts, figure formatting. */
import { type Figure, fmt, fmtFigure } from '../stats.js';

export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string[] {
  return [`| ${headers.join(' | ')} |`, `|${headers.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)];
}

export function chart(title: string, unit: string, labels: readonly string[], values: readonly number[]): string[] {
  const max = Math.max(...values.filter(Number.isFinite), 0);
  const top = max > 0 ? Number((max * 1.15).toPrecision(2)) : 1;
  return [
    '```mermaid',
    'xychart-beta',
    `    title "${title}"`,
    `    x-axis [${labels.map((l) => `"${l}"`).join(', ')}]`,
    `    y-axis "${unit}" 0 --> ${top}`,
    `    bar [${values.map((v) => (Number.isFinite(v) ? Number(v.toPrecision(4)) : 0)).join(', ')}]`,
    '```',
  ];
}

/** ms with three digits below 10. */
export const ms3 = (f: Figure | undefined): string => (f ? fmtFigure(f, 3) : 'n/a');
export const ms = (f: Figure | undefined): string => (f ? fmtFigure(f, 2) : 'n/a');
/** A share as a percentage figure. */
export const pct = (f: Figure): string => `${fmt(f.median * 100, 1)} % (${fmt(f.min * 100, 1)}–${fmt(f.max * 100, 1)})`;
export const count = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
