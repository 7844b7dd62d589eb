import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus } from '@nestjs/common';
import { DbLockError, InvalidLockKeyError, LockLostError, LockTimeoutError, LockUpgradeError } from '../lib/index.js';

/**
 * Maps lock errors to HTTP answers. The library itself throws plain errors (locks also run in
 * crons and consumers); the mapping is the app's choice:
 * - LockTimeoutError -> 423 Locked (someone else holds it; retry later)
 * - LockLostError    -> 409 Conflict (our lease was taken over; nothing was committed)
 * - InvalidLockKeyError -> 400
 */
@Catch(DbLockError)
export class LockExceptionFilter implements ExceptionFilter {
  catch(error: DbLockError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<{ status(code: number): { json(body: unknown): void } }>();
    const status =
      error instanceof LockTimeoutError
        ? HttpStatus.LOCKED
        : error instanceof LockLostError || error instanceof LockUpgradeError
          ? HttpStatus.CONFLICT
          : error instanceof InvalidLockKeyError
            ? HttpStatus.BAD_REQUEST
            : HttpStatus.SERVICE_UNAVAILABLE;
    response.status(status).json({ statusCode: status, error: error.name, message: error.message });
  }
}
