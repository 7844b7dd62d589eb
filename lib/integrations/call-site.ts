/**
 * Where in the app a statement came from: the first stack frame outside this library,
 * node_modules and Node's internals. V8 keeps the awaiting callers of an async call chain as
 * `at async ...` frames, so the method that awaited a repository call is found even though the
 * statement is sent from deep inside TypeORM.
 */

/** The library's root folder (lib/ or dist/esm/ or dist/cjs/): two levels above this file. */
const LIBRARY_ROOT = libraryRoot();

/** Deep enough to get past TypeORM's query builders and this library's frames. */
const STACK_DEPTH = 64;

export function callSite(): string | undefined {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = STACK_DEPTH;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  for (const line of stack.split('\n').slice(1)) {
    const frame = line.trim();
    if (!frame.startsWith('at ')) continue;
    const file = fileOf(frame);
    if (!file || file.startsWith('node:') || file.includes('/node_modules/') || file.includes('\\node_modules\\')) continue;
    if (LIBRARY_ROOT && file.startsWith(LIBRARY_ROOT)) continue;
    return readable(frame.slice(3).replace(/^async /, ''));
  }
  return undefined;
}

/** The file (path or URL) of a frame like `at async Foo.bar (file:///app/x.js:1:2)` or `at /app/x.js:1:2`. */
function fileOf(frame: string): string | undefined {
  const match = /\(?((?:file:\/\/|node:)?[^()\s]+?):\d+:\d+\)?$/.exec(frame);
  return match?.[1];
}

function libraryRoot(): string | undefined {
  const frame = (new Error().stack ?? '').split('\n').find((line) => line.trim().startsWith('at '));
  const file = frame ? fileOf(frame.trim()) : undefined;
  if (!file) return undefined;
  const parts = file.split(/(?<=[/\\])/);
  return parts.length > 2 ? parts.slice(0, -2).join('') : undefined;
}

/** Paths under the working directory are shown relative to it. */
function readable(frame: string): string {
  const cwd = process.cwd();
  return frame.replace(`file://${cwd}/`, '').replace(`${cwd}/`, '');
}
