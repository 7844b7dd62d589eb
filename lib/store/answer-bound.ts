/**
 * Bound on a round trip of the library's own connections, or on a statement that ends a business
 * transaction (the fence, COMMIT), with no deadline of its own, ms: lock statements wait at most a
 * second on the server, and a cluster holds commits for seconds when a node dies; past this the
 * answer is taken as lost, and the caller gets a typed error, not a hang.
 */
export const ANSWER_BOUND_MS = 15_000;

/**
 * The least time a key row's creation on the library's pool is given to answer, ms, past any lock
 * wait it may have: a round trip's, since a single try has no budget left to give it.
 */
export const KEY_ROWS_ANSWER_MS = 250;
