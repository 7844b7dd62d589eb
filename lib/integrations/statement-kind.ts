import { LOCK_LOG_TABLE, LOCK_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE } from '../store/tables.js';

/** Leading comments (`/* ... *\/`, `-- ...`) and a parenthesis a statement may start with. */
const LEAD = String.raw`^\s*(?:(?:\/\*[\s\S]*?\*\/|--[^\n]*\n|#[^\n]*\n)\s*)*\(?\s*`;
const WRITE = new RegExp(`${LEAD}(?:insert|update|delete|replace)\\b`, 'i');
const READ = new RegExp(`${LEAD}(?:select|with)\\b`, 'i');
const LOCKING_CLAUSE = /\bfor\s+update\b|\bfor\s+share\b|\block\s+in\s+share\s+mode\b/i;
const LIBRARY_TABLES = new Set([LOCK_TABLE, LOCK_LOG_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE].map((table) => table.toLowerCase()));
/** The table a statement writes or reads first, schema-qualified or not, quoted or not (a name, not text anywhere in it). */
const NAME = '[`"]?(?:\\w+[`"]?\\.[`"]?)?(\\w+)';
const TARGET = new RegExp(
  `${LEAD}(?:(?:insert|replace)(?:\\s+(?:low_priority|delayed|high_priority|ignore))*(?:\\s+into)?|update(?:\\s+(?:low_priority|ignore))*|delete(?:\\s+(?:low_priority|quick|ignore))*\\s+from|(?:select|with)\\b[\\s\\S]*?\\bfrom)\\s+${NAME}`,
  'i',
);

/**
 * A statement that takes row locks: a write (INSERT, UPDATE, DELETE, REPLACE) or a locking read
 * (FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE). These are the statements that escape a fence
 * (they change data outside it) or wait for its row locks. Plain reads, transaction control and
 * SET are not.
 */
export function takesRowLocks(sql: string): boolean {
  return WRITE.test(sql) || (READ.test(sql) && LOCKING_CLAUSE.test(sql));
}

/** A read (SELECT or WITH), locking or not. */
export function readsRows(sql: string): boolean {
  return READ.test(sql);
}

/**
 * A statement whose target is one of the library's own tables (a row-lock grant, a release): never
 * an escaped business write. The target is the table the statement writes (or a read's first
 * table), not a name found anywhere in its text: a business write naming a library table in a
 * literal, a comment or a subquery is still a business write.
 */
export function isLibraryStatement(sql: string): boolean {
  const table = TARGET.exec(sql)?.[1];
  return table !== undefined && LIBRARY_TABLES.has(table.toLowerCase());
}

/** The statement on one line, at most 120 characters, for messages. */
export function shortStatement(sql: string): string {
  const line = sql.replace(/\s+/g, ' ').trim();
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}
