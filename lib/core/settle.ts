/**
 * `fn`'s outcome as a promise: its value, its rejection, or what it threw. For the paths every
 * locked call takes, written as promise handlers rather than async functions (each async frame
 * costs promises and microtask hops there), where a synchronous throw must still reject.
 */
export function settle<T>(fn: () => Promise<T> | T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (error) {
    return Promise.reject(error);
  }
}
