/**
 * Closes a mysql2 connection that may have a statement in flight, so that statement fails.
 *
 * mysql2's `destroy()` first marks the connection as closing, and a connection marked closing
 * ignores its socket's close: a query in flight never answers, and whoever awaits it (a
 * row-lock holder's work on its manager, a doorbell wait without a deadline) hangs forever.
 * Destroying the socket instead ends the connection as a network failure would: the statement in
 * flight fails with PROTOCOL_CONNECTION_LOST, and a pool drops the connection on that error.
 */
export function closeUnderWork(connection: unknown): void {
  const c = connection as { stream?: { destroy?: () => void; destroyed?: boolean }; destroy?: () => void } | undefined;
  if (typeof c?.stream?.destroy !== 'function') return c?.destroy?.();
  // Closed once already (a second cut of the same session): its close is on its way, and
  // destroy() now would make mysql2 ignore it, leaving the statement in flight unanswered.
  if (!c.stream.destroyed) c.stream.destroy();
}
