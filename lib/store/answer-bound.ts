/**
 * Bound on a round trip of the library's own connections, or on a statement that ends a business
 * transaction (the fence, COMMIT), with no deadline of its own, ms: lock statements wait at most a
 * second on the server, and a cluster holds commits for seconds when a node dies; past this the
 * answer is taken as lost, and the caller gets a typed error, not a hang.
 */
export const ANSWER_BOUND_MS = 15_000;
