/**
 * What a fresh database starts with: 8 investors, 4 loans, 15 claims. Fixed ids, so seeding is
 * idempotent (INSERT IGNORE) and the tests and the demo know what to expect.
 */
export const OPENING_CENTS = 1_000_000;

export const SEED_INVESTORS = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Donald', 'Frances', 'Ken'].map((name, i) => ({
  id: i + 1,
  name,
  openingCents: OPENING_CENTS,
  balanceCents: OPENING_CENTS,
}));

export const SEED_LOANS = [
  { id: 1, borrower: 'Bakery on Main St', principalCents: 10_000_000 },
  { id: 2, borrower: 'Solar co-op', principalCents: 25_000_000 },
  { id: 3, borrower: 'Bike repair shop', principalCents: 5_000_000 },
  { id: 4, borrower: 'Food truck', principalCents: 3_000_000 },
].map((loan) => ({ ...loan, outstandingCents: loan.principalCents, repaidCents: 0, repayments: 0 }));

/** [loanId, investorId, principalCents]; each loan's claims add up to its principal. */
const CLAIMS: readonly (readonly [number, number, number])[] = [
  [1, 1, 4_000_000], [1, 2, 3_000_000], [1, 3, 2_000_000], [1, 4, 1_000_000],
  [2, 2, 5_000_000], [2, 3, 5_000_000], [2, 5, 5_000_000], [2, 6, 5_000_000], [2, 7, 5_000_000],
  [3, 1, 2_000_000], [3, 4, 2_000_000], [3, 8, 1_000_000],
  [4, 5, 1_000_000], [4, 6, 1_000_000], [4, 8, 1_000_000],
];

export const SEED_CLAIMS = CLAIMS.map(([loanId, investorId, principalCents], i) => ({
  id: i + 1,
  loanId,
  investorId,
  principalCents,
  receivedCents: 0,
  transfers: 0,
}));
