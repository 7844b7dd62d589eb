import { randomUUID } from 'node:crypto';
import { resolveTargets } from '../../../lib/core/lock-key.js';
import type { GrantInput } from '../../../lib/store/mysql/grant.sql.js';

/** A single-key exclusive lease grant's input as the library builds it, for the bench's by-hand shapes and counts. */
export function benchGrantInput(key: string, extra: Partial<GrantInput> = {}): GrantInput {
  return {
    acquisitionId: randomUUID(),
    holder: 'h:1',
    processId: '1',
    strategy: 'lease',
    targets: resolveTargets(key, 'write', ''),
    leaseMs: 30_000,
    waitedMs: 0,
    writerWaitMarkMs: 0,
    writerPreference: true,
    ...extra,
  };
}
