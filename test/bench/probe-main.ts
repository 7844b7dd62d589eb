/** Runs a development probe's `main` and exits: 0 when it finished, 1 (its error printed) when it threw. */
export function runProbe(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
