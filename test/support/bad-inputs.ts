import { MAX_KEY_LENGTH } from '../../lib/index.js';

/** The bad inputs of contract/bad-input.test.ts: keys, and call options with what their error must say. */
export const NAMESPACE = 'ns'; // keys are stored as 'ns:<key>', so the key itself may have 188 characters
export const KEY_ROOM = MAX_KEY_LENGTH - NAMESPACE.length - 1;

export const BAD_KEYS: [string, unknown][] = [
  ['empty', ''],
  ['over-long (192 chars incl. namespace)', 'x'.repeat(KEY_ROOM + 1)],
  ['over-long in code points (emoji)', '🔒'.repeat(KEY_ROOM + 1)],
  ['number', 42],
  ['null', null],
  ['undefined', undefined],
  ['boolean', true],
  ['bigint', 10n],
  ['symbol', Symbol('k')],
  ['function', () => 'k'],
  ['object', { toString: () => 'k' }],
  ['key spec not in an array', { key: 'k' }],
  ['Buffer', Buffer.from('k')],
  ['String object', new String('k')],
  ['empty array', []],
  ['array with a number', ['ok', 1]],
  ['array with null', [null]],
  ['array with an object', ['ok', {}]],
  ['nested array', [['k']]],
  ['spec with a non-string key', [{ key: 42 }]],
  ['spec with an empty key', [{ key: '' }]],
  ['too many keys', Array.from({ length: 101 }, (_, i) => `k${i}`)],
  ['lone high surrogate', '\uD800'],
  ['lone low surrogate inside', 'a\uDC00b'],
  ['lone surrogate in an array', ['ok', 'x\uD83D']],
];

export const BAD_CALL_OPTIONS: [string, unknown, RegExp[]][] = [
  ['timeoutMs NaN', { timeoutMs: NaN }, [/timeoutMs .*NaN/]],
  ['timeoutMs negative', { timeoutMs: -1 }, [/timeoutMs .*-1/]],
  ['timeoutMs fractional', { timeoutMs: 1.5 }, [/timeoutMs .*1\.5/]],
  ['timeoutMs huge', { timeoutMs: 2 ** 31 }, [/timeoutMs .*2147483648/]],
  ['timeoutMs string', { timeoutMs: '100' }, [/timeoutMs .*'100'/]],
  ['leaseMs NaN', { leaseMs: NaN }, [/leaseMs .*NaN/]],
  ['leaseMs negative', { leaseMs: -1000 }, [/leaseMs .*-1000/]],
  ['leaseMs zero', { leaseMs: 0 }, [/leaseMs /]],
  ['leaseMs fractional', { leaseMs: 1000.5 }, [/leaseMs .*1000\.5/]],
  ['leaseMs huge', { leaseMs: 2 ** 31 }, [/leaseMs .*2147483648/]],
  ['leaseMs Infinity', { leaseMs: Infinity }, [/leaseMs .*Infinity/]],
  ['unknown option', { timeout: 5 }, [/unknown option 'timeout'/]],
  ['bad mode', { mode: 'exclusive' }, [/mode .*'exclusive'/]],
  ['options not an object', 'fast', [/must be an object/]],
  ['options an array', [], [/must be an object/]],
  ['every problem at once', { timeoutMs: NaN, leaseMs: -1, mode: 'x', lease: 1 }, [/unknown option 'lease'/, /mode /, /timeoutMs /, /leaseMs /]],
];
