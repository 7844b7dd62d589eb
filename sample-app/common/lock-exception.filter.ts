import { type ArgumentsHost, Catch, type ExceptionFilter, HttpStatus } from '@nestjs/common';
import { DbLockError, InvalidLockKeyError, LockLostError, LockTimeoutError, LockUpgradeError } from '../nestjs-db-lock.js';

/**
 * HTTP answers for lock errors. The library throws plain errors, not HttpExceptions, because
 * locks also run in crons and queue consumers; the mapping is the app's choice:
 *
 * | error                    | status                  | meaning for the client                          |
 * |--------------------------|-------------------------|-------------------------------------------------|
 * | LockTimeoutError         | 423 Locked, Retry-After | someone else holds it: nothing was done, retry  |
 * | LockLostError            | 409 Conflict            | our lease was taken over: nothing was committed |
 * | LockUpgradeError         | 409 Conflict            | read -> write on one key in one call chain      |
 * | InvalidLockKeyError      | 400 Bad Request         | a key built from bad input                      |
 * | any other DbLockError    | 503 Service Unavailable | shutting down, or not initialised yet           |
 *
 * Every other exception (NotFoundException thrown inside a locked method, validation errors...)
 * is not caught here and keeps its own status: the locked method's errors reach Nest unchanged.
 */
/** The part of Express's response this filter uses (no @types/express needed). */
interface HttpResponse {
  setHeader(name: string, value: string): void;
  status(code: number): { json(body: unknown): void };
}

@Catch(DbLockError)
export class LockExceptionFilter implements ExceptionFilter<DbLockError> {
  catch(error: DbLockError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<HttpResponse>();
    const status = statusOf(error);
    if (status === HttpStatus.LOCKED) response.setHeader('Retry-After', '1');
    response.status(status).json({ statusCode: status, error: error.name, message: error.message });
  }
}

function statusOf(error: DbLockError): HttpStatus {
  if (error instanceof LockTimeoutError) return HttpStatus.LOCKED;
  if (error instanceof LockLostError || error instanceof LockUpgradeError) return HttpStatus.CONFLICT;
  if (error instanceof InvalidLockKeyError) return HttpStatus.BAD_REQUEST;
  return HttpStatus.SERVICE_UNAVAILABLE;
}
