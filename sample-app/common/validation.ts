import { applyDecorators, ValidationPipe } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { IsInt, Max, Min } from 'class-validator';

/** Largest id of the INT id columns. */
export const MAX_ID = 2_147_483_647;

/**
 * The app-wide pipe (registered as APP_PIPE, so tests that boot the module get it too):
 * - whitelist + forbidNonWhitelisted: a property the DTO does not declare is a 400, not ignored;
 * - transform: handlers receive DTO instances with the types they declare;
 * - stopAtFirstError: one message per property (`cents must be an integer number`), not three.
 * No implicit conversion: in a JSON body, `"cents": "500"` or `true` is a 400, never coerced.
 */
export function sampleValidationPipe(): ValidationPipe {
  return new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true, stopAtFirstError: true });
}

/**
 * An id in a path or query string: digits only, 1 to MAX_ID. Path and query values are strings,
 * so this converts them itself, strictly: `'1.5'`, `'1e3'`, `'0x10'`, `' 7'` and `'-1'` stay
 * strings and fail `IsInt` (a plain `Number()` would accept several of them).
 */
export function IsIdParam(max = MAX_ID): PropertyDecorator {
  return applyDecorators(
    Transform(({ value }: { value: unknown }) => (typeof value === 'string' && /^\d{1,10}$/.test(value) ? Number(value) : value)),
    IsInt(),
    Min(1),
    Max(max),
  );
}
