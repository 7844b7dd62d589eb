/**
 * Ends this process still owes: log rows that a release or a give-back could not end because the
 * database stayed out of reach longer than their retries (a node death, a network cut).
 *
 * They are settled before the next renewal of the process lease, and that renewal is not sent
 * until they are. A holder's lease runs until its process's latest renewal plus its lease, so a
 * renewal extends every live row of the process: without this, a lock its holder gave up (its
 * signal already aborted) would stay live in the database, and its key taken, for as long as the
 * process renews for other locks it holds. `End` is how a store sends one end again (MySQL: a
 * statement plan, PostgreSQL: a statement).
 */
export class UnendedRows<End> {
  private readonly owed = new Map<string, End>();

  /** `id` names what is owed (the same rows owed twice are ended once). */
  owe(id: string, end: End): void {
    this.owed.set(id, end);
  }

  get size(): number {
    return this.owed.size;
  }

  /** Sends every owed end (each is idempotent: it only ends rows still live); throws at the first failure, keeping the rest owed. */
  async settle(run: (end: End) => Promise<unknown>): Promise<void> {
    for (const [id, end] of [...this.owed]) {
      await run(end);
      this.owed.delete(id);
    }
  }
}
