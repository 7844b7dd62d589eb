import { SEMAPHORE_LIMIT, SEMAPHORE_WORK_MS } from '../semaphore.js';
import { fmt, fmtFigure } from '../stats.js';
import { ms3, table } from './markdown.js';
import type { BenchResults } from './results.js';

/** The semaphore beside a lock on the same work. */
export function semaphoreSection(r: BenchResults): string[] {
  const s = r.semaphore;
  if (!s) return [];
  const ratio = (a: number, b: number): string => `${fmt(a / b, 2)}×`;
  return [
    '## Semaphore beside a lock',
    '',
    `The same work under \`withLock(key)\` and under \`withSemaphore(key, ${SEMAPHORE_LIMIT})\` (lease strategy), rounds interleaved. ` +
      `Uncontended: sequential acquire + release in one process, ms per operation. Contended: ${r.config.processes} processes × ` +
      `${r.config.callersPerProcess} callers on one key, each entry ${SEMAPHORE_WORK_MS} ms of work inside, entries per second. ` +
      `A permit's grant counts the key's live permits under the key row lock; a lock's single-key grant is one conditional UPDATE.`,
    '',
    ...table(
      ['figure', 'lock', `semaphore (limit ${SEMAPHORE_LIMIT})`, 'semaphore / lock'],
      [
        [
          'uncontended acquire + release, ms',
          ms3(s.uncontended.lock),
          ms3(s.uncontended.semaphore),
          ratio(s.uncontended.semaphore.median, s.uncontended.lock.median),
        ],
        [
          'contended entries/s',
          fmtFigure(s.contended.lock, 1),
          fmtFigure(s.contended.semaphore, 1),
          ratio(s.contended.semaphore.median, s.contended.lock.median),
        ],
      ],
    ),
    '',
  ];
}
