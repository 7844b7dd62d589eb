/**
 * Module resolution hooks (node:module `register`) that make `mysql2` unresolvable, as in an app
 * that never installed it: for checking that a PostgreSQL app loads and runs the library without it.
 */
export async function resolve(
  specifier: string,
  context: { parentURL?: string },
  next: (specifier: string, context: unknown) => Promise<unknown>,
): Promise<unknown> {
  if (specifier === 'mysql2' || specifier.startsWith('mysql2/'))
    throw Object.assign(new Error(`Cannot find package '${specifier}' (blocked by the test) imported from ${context.parentURL ?? '?'}`), {
      code: 'ERR_MODULE_NOT_FOUND',
    });
  return next(specifier, context);
}
