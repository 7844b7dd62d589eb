/** Every design by id, built from the same dependencies in the bench's process or in a worker. */
import {
  forUpdateDesign,
  getLockDesign,
  rowLockByHandDesign,
  rowLockByHandNoAuditDesign,
  rowLockByHandPreAuditDesign,
  rowLockByHandLeanAuditDesign,
} from './blocking.js';
import { leaseDecoratedDesign, leaseDesign, rowLockDesign } from './library.js';
import { forUpdateOrmDesign, rowLockByHandOrmDesign } from './typeorm-work.js';
import { leaseByHandDesign } from './lease-by-hand.js';
import { naiveTableDesign, redlockDesign } from './peers.js';
import type { DesignDeps, DesignId, LockDesign } from './types.js';

export * from './types.js';
export { grantStatements } from './library.js';

export async function createDesign(id: DesignId, deps: DesignDeps): Promise<LockDesign> {
  switch (id) {
    case 'lease':
      return leaseDesign(deps);
    case 'lease-decorated':
      return leaseDecoratedDesign(deps);
    case 'lease-hand':
      return leaseByHandDesign(deps);
    case 'row-lock':
      return rowLockDesign(deps);
    case 'row-lock-hand':
      return rowLockByHandDesign(deps);
    case 'row-lock-hand-orm':
      return rowLockByHandOrmDesign(deps);
    case 'row-lock-hand-no-audit':
      return rowLockByHandNoAuditDesign(deps);
    case 'row-lock-hand-pre-audit':
      return rowLockByHandPreAuditDesign(deps);
    case 'row-lock-hand-lean-audit':
      return rowLockByHandLeanAuditDesign(deps);
    case 'for-update':
      return forUpdateDesign(deps);
    case 'for-update-orm':
      return forUpdateOrmDesign(deps);
    case 'get-lock':
      return getLockDesign(deps);
    case 'redlock':
      return redlockDesign(deps);
    case 'naive-table':
      return naiveTableDesign(deps);
  }
}
