import { SEED_CLAIMS, SEED_INVESTORS } from '../lending/seed-data.js';

export type Kind = 'repay' | 'transfer' | 'order' | 'statement';

/** One request of the demo and how it was answered. */
export interface Outcome {
  kind: Kind;
  instance: number;
  loanId?: number;
  /** HTTP status, or 0 if the request failed without an answer. */
  status: number;
  /** `error` field of the answer (`LockTimeoutError`, `Conflict`...), if any. */
  error?: string;
  body: Record<string, unknown>;
}

export interface LoadPlan {
  repayments: number;
  transfers: number;
  orders: number;
  statements: number;
  /** Requests in flight at once, over all instances. */
  concurrency: number;
}

/** Four loans, loan 1 the busiest: repayments and transfers of the same loan really meet. */
const LOAN_WEIGHTS: readonly [number, number][] = [
  [1, 0.35],
  [2, 0.25],
  [3, 0.2],
  [4, 0.2],
];

interface Request {
  kind: Kind;
  loanId?: number;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
}

/** The plan as a shuffled list of requests. */
export function buildRequests(plan: LoadPlan): Request[] {
  const requests: Request[] = [];
  for (let i = 0; i < plan.repayments; i++) {
    const loanId = pickLoan();
    requests.push({ kind: 'repay', loanId, method: 'POST', path: `/loans/${loanId}/repay`, body: { cents: 100 + randomInt(4_900) } });
  }
  for (let i = 0; i < plan.transfers; i++) {
    const loanId = pickLoan();
    const claims = SEED_CLAIMS.filter((c) => c.loanId === loanId);
    const claim = claims[randomInt(claims.length)]!;
    // Any investor: now and then the buyer already holds the claim, a business 409.
    const buyerId = SEED_INVESTORS[randomInt(SEED_INVESTORS.length)]!.id;
    requests.push({ kind: 'transfer', loanId, method: 'POST', path: `/loans/${loanId}/claims/${claim.id}/transfer`, body: { buyerId } });
  }
  for (let i = 0; i < plan.orders; i++) requests.push({ kind: 'order', method: 'POST', path: '/orders' });
  for (let i = 0; i < plan.statements; i++) {
    const loanId = pickLoan();
    requests.push({ kind: 'statement', loanId, method: 'GET', path: `/loans/${loanId}` });
  }
  for (let i = requests.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [requests[i], requests[j]] = [requests[j]!, requests[i]!];
  }
  return requests;
}

/** Sends every request, `concurrency` at a time, round-robin over the instances' base URLs. */
export async function runLoad(baseUrls: readonly string[], requests: readonly Request[], concurrency: number): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const index = next++;
      const instance = index % baseUrls.length;
      outcomes.push(await send(instance, baseUrls[instance]!, requests[index]!));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return outcomes;
}

async function send(instance: number, baseUrl: string, request: Request): Promise<Outcome> {
  const outcome: Outcome = { kind: request.kind, instance, loanId: request.loanId, status: 0, body: {} };
  try {
    const response = await fetch(baseUrl + request.path, {
      method: request.method,
      headers: request.body === undefined ? {} : { 'content-type': 'application/json' },
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      signal: AbortSignal.timeout(30_000),
    });
    outcome.status = response.status;
    outcome.body = (await response.json()) as Record<string, unknown>;
    if (typeof outcome.body.error === 'string') outcome.error = outcome.body.error;
  } catch (error) {
    outcome.error = error instanceof Error ? error.message : String(error);
  }
  return outcome;
}

function pickLoan(): number {
  let r = Math.random();
  for (const [loanId, weight] of LOAN_WEIGHTS) if ((r -= weight) < 0) return loanId;
  return LOAN_WEIGHTS[0]![0];
}

function randomInt(below: number): number {
  return Math.floor(Math.random() * below);
}
