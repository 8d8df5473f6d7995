/**
 * One API credential's configuration: its id, the environment variable holding its secret, its budget and how the
 * secret is sent. Validated with zod when the configuration is loaded (`RETRYQ_CREDENTIALS`). A leaf: `src/config.ts`
 * reads the credential list with it, and load control (`src/load-control/`) and the workers compute budgets from it.
 *
 * @example
 * ```ts
 * import { budgetOf, credentialSchema } from './credential-config.js';
 * const credential = credentialSchema.parse({ id: 'acme-prod', secretEnv: 'ACME_PROD_KEY', requestsPerMinute: 600 });
 * budgetOf(credential).inspectPerMinute; // 120 (the default reserve, 0.2)
 * ```
 */
import { z } from 'zod';
import { credentialIdSchema, headerNameSchema } from './intent.js';
import { budgetProblem, splitBudget } from './policy/index.js';
import type { BudgetSplit } from './policy/index.js';

const envVarPattern = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One API credential retryq may dispatch with. Only the *name* of the variable holding the secret is config. */
export const credentialSchema = z
  .strictObject({
    /** The credential id used in intents, task queue names and the UI, e.g. `acme-prod`. */
    id: credentialIdSchema,
    /** Name of the environment variable that holds the secret (API key) on the worker. */
    secretEnv: z.string().regex(envVarPattern, 'must be an environment variable name like ACME_PROD_KEY'),
    /**
     * The provider's limit for this key, in requests per minute: one budget for every call made with it (dispatches
     * and inspections), shared by all worker processes through the credential's load control.
     * @default 600
     */
    requestsPerMinute: z
      .number()
      .int()
      .min(2, 'must be at least 2 (dispatches and inspections share it)')
      .max(1_000_000)
      .default(600),
    /** Dispatches in flight at once per worker. @default 4 */
    concurrency: z.number().int().positive().max(1000).default(4),
    /**
     * The part of `requestsPerMinute` reserved for inspections: a share in (0, 1) or a whole number of requests per
     * minute. Reserved inside the budget (dispatch gets the rest while inspections run, and all of it otherwise).
     * @default 0.2
     */
    inspectReserve: z
      .number()
      .positive('must be a share in (0, 1) or a whole number ≥ 1 of requests per minute')
      .default(0.2),
    /** Inspections in flight at once per worker. @default 2 */
    inspectConcurrency: z.number().int().positive().max(1000).default(2),
    /** Request header that carries the secret. @default 'authorization' */
    authHeader: headerNameSchema.default('authorization'),
    /** Scheme before the secret (`Bearer <secret>`); empty for the bare secret (e.g. with `x-api-key`). @default 'Bearer' */
    authScheme: z
      .string()
      .regex(/^[A-Za-z0-9-]*$/, 'must be a single word such as Bearer, or empty')
      .default('Bearer'),
    /**
     * What a quota the provider states in its rate-limit headers (`RateLimit-Policy`, …) may do to
     * `requestsPerMinute`: `down` only lowers it (a provider stating less is obeyed), `up` also raises it to what
     * the provider states. A `remaining` of 0 closes the gate until the reset either way (docs/load-control.md).
     * @default 'down'
     */
    learn: z
      .enum(['down', 'up'], "must be 'down' (a stated quota only lowers the budget) or 'up' (it may raise it too)")
      .default('down'),
    /**
     * A response header that names the provider's rate-limit bucket (e.g. `x-shopify-bucket`), read besides
     * `X-RateLimit-Bucket` and `X-RateLimit-Resource` (and before them). @default none
     */
    bucketHeader: headerNameSchema.optional(),
  })
  .superRefine((c, ctx) => {
    // A bad requestsPerMinute is reported on its own; the split is judged only against a valid one.
    if (!Number.isInteger(c.requestsPerMinute) || c.requestsPerMinute < 2) return;
    const problem = budgetProblem(c.requestsPerMinute, c.inspectReserve);
    if (problem) ctx.addIssue({ code: 'custom', path: ['inspectReserve'], message: problem });
  });
export type CredentialConfig = z.infer<typeof credentialSchema>;

/** A credential's budget split (validated by {@link credentialSchema}, so it never throws for loaded config). */
export function budgetOf(c: Pick<CredentialConfig, 'requestsPerMinute' | 'inspectReserve'>): BudgetSplit {
  return splitBudget(c.requestsPerMinute, c.inspectReserve);
}
