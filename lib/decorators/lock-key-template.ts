import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { InvalidLockKeyError } from '../errors/invalid-lock-key.error.js';

/**
 * What a lock decorator accepts as its key:
 * - a string, possibly a template over the method's arguments: `'loan:{0}'`, `'order:{0.id}'`,
 *   `'{1.customer.id}'` (argument position, then property names or array indexes; `{{` and `}}`
 *   are literal braces);
 * - an array of those (several keys, taken all-or-nothing);
 * - a function of the arguments returning a key or keys (typed against the method's parameters).
 */
export type LockKeySource<A extends unknown[] = any[]> = string | readonly string[] | ((...args: A) => string | readonly string[]);

/** Turns a call's arguments into the keys to lock. Validation of the keys themselves is the core's. */
export type KeyResolver = (args: readonly unknown[], self: unknown) => string | readonly string[];

type Part = string | { readonly index: number; readonly path: readonly string[]; readonly text: string };

const PLACEHOLDER = /^(\d+)((?:\.[A-Za-z_$][\w$]*|\.\d+)*)$/;
const FORBIDDEN_SEGMENTS = new Set(['__proto__', 'prototype', 'constructor']);

/**
 * Compiles the key source once, when the class loads: malformed templates, placeholders past
 * the method's parameters (when known) and wrong types throw DbLockOptionsError there, not on
 * the first call.
 * @param where names the decorated method in error messages.
 * @param parameterCount the method's declared parameters, if known (design:paramtypes).
 */
export function compileLockKeys(source: unknown, where: string, parameterCount: number | undefined): KeyResolver {
  if (typeof source === 'function') {
    const fn = source as (...args: unknown[]) => string | readonly string[];
    return (args, self) => fn.apply(self, args as unknown[]);
  }
  if (typeof source === 'string') {
    const render = compileTemplate(source, where, parameterCount);
    return (args) => render(args);
  }
  if (Array.isArray(source)) {
    if (source.length === 0) throw new DbLockOptionsError(['key must not be an empty array'], `lock key of ${where}`);
    const renders = source.map((item: unknown, i) => {
      if (typeof item !== 'string') throw new DbLockOptionsError([`key[${i}] must be a string template, got ${typeof item}`], `lock key of ${where}`);
      return compileTemplate(item, where, parameterCount);
    });
    return (args) => renders.map((render) => render(args));
  }
  throw new DbLockOptionsError(
    [
      `key must be a string, a template like 'order:{0.id}', an array of those, or a function of the arguments; got ${source === null ? 'null' : typeof source}`,
    ],
    `lock key of ${where}`,
  );
}

/** One template to a renderer. Plain strings render to themselves. */
export function compileTemplate(template: string, where: string, parameterCount: number | undefined): (args: readonly unknown[]) => string {
  const parts = parseTemplate(template, where, parameterCount);
  if (parts.every((p) => typeof p === 'string')) {
    const constant = parts.join('');
    return () => constant;
  }
  return (args) => parts.map((part) => (typeof part === 'string' ? part : renderPlaceholder(template, part, args))).join('');
}

function parseTemplate(template: string, where: string, parameterCount: number | undefined): Part[] {
  const problem = (message: string): never => {
    throw new DbLockOptionsError([`key template '${template}': ${message}`], `lock key of ${where}`);
  };
  const parts: Part[] = [];
  let literal = '';
  for (let i = 0; i < template.length; i++) {
    const char = template[i]!;
    if (char === '}') {
      if (template[i + 1] !== '}') problem(`unmatched '}' at position ${i} (write '}}' for a literal brace)`);
      literal += '}';
      i++;
      continue;
    }
    if (char !== '{') {
      literal += char;
      continue;
    }
    if (template[i + 1] === '{') {
      literal += '{';
      i++;
      continue;
    }
    const end = template.indexOf('}', i + 1);
    if (end < 0) problem(`unclosed '{' at position ${i}`);
    const text = template.slice(i + 1, end);
    const match = PLACEHOLDER.exec(text);
    if (!match) problem(`placeholder {${text}} must be an argument position with an optional property path, like {0} or {0.id}`);
    const index = Number(match![1]);
    const path = match![2] ? match![2].slice(1).split('.') : [];
    const bad = path.find((segment) => FORBIDDEN_SEGMENTS.has(segment));
    if (bad) problem(`placeholder {${text}} must not read '${bad}'`);
    if (parameterCount !== undefined && index >= parameterCount)
      problem(`placeholder {${text}} names argument ${index}, but the method declares ${parameterCount} parameter(s)`);
    if (literal) parts.push(literal);
    literal = '';
    parts.push({ index, path, text });
    i = end;
  }
  if (literal) parts.push(literal);
  return parts;
}

function renderPlaceholder(template: string, part: Exclude<Part, string>, args: readonly unknown[]): string {
  let value: unknown = args[part.index];
  for (const segment of part.path) {
    if (value === null || value === undefined) break;
    value = (value as Record<string, unknown>)[segment];
  }
  if (typeof value === 'string') {
    if (value.length === 0) throw new InvalidLockKeyError(template, `placeholder {${part.text}} is an empty string`);
    return value;
  }
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return String(value);
  // 'order:undefined' or 'order:[object Object]' would be a valid but wrong key: refuse it.
  throw new InvalidLockKeyError(
    template,
    `placeholder {${part.text}} must be a non-empty string, a finite number or a bigint, got ${value === null ? 'null' : typeof value}`,
  );
}
