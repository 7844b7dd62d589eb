import { LOCK_LOG_TABLE, LOCK_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE } from '../store/tables.js';

/** Leading comments (`/* ... *\/`, `-- ...`) and a parenthesis a statement may start with. */
const LEAD = String.raw`^\s*(?:(?:\/\*[\s\S]*?\*\/|--[^\n]*\n|#[^\n]*\n)\s*)*\(?\s*`;
const WRITE = new RegExp(`${LEAD}(?:insert|update|delete|replace)\\b`, 'i');
const READ = new RegExp(`${LEAD}(?:select|with)\\b`, 'i');
const LOCKING_CLAUSE = /\bfor\s+update\b|\bfor\s+share\b|\block\s+in\s+share\s+mode\b/i;
const LIBRARY_TABLES = new RegExp(`\\b(?:${[LOCK_TABLE, LOCK_LOG_TABLE, PROCESS_TABLE, ROW_LOCK_TABLE].join('|')})\\b`, 'i');

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

/** A statement on the library's own tables (a row-lock grant, a release): never an escaped business write. */
export function isLibraryStatement(sql: string): boolean {
  return LIBRARY_TABLES.test(sql);
}

/** The statement on one line, at most 120 characters, for messages. */
export function shortStatement(sql: string): string {
  const line = sql.replace(/\s+/g, ' ').trim();
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}
