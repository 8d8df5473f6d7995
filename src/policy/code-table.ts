/**
 * The code table: what a provider's structured error code means, as data a user can extend.
 *
 * A code rule beats the HTTP status: a 429 whose code says `insufficient_quota` is a permanent quota
 * failure (waiting does not refill a spending limit), and a 403 whose code says `rate_limited` is a
 * rate limit.
 *
 * @module
 */

/** Every reason a permanent decision may give. */
export const permanentReasons = ['permission', 'invalid', 'conflict', 'not_found', 'quota', 'other'] as const;

/** Why a permanent decision is permanent. */
export type PermanentReason = (typeof permanentReasons)[number];

/**
 * What one structured error code means.
 *
 * - `rate_limited`: too many requests; wait (for `Retry-After`, else the backoff) and retry.
 * - `transient`: a passing condition the provider answered definitely (the request was not carried
 *   out); retry on the backoff.
 * - `permanent`: retrying cannot help; `reason` says which kind.
 */
export type CodeRule =
  | { readonly kind: 'rate_limited' }
  | { readonly kind: 'transient' }
  | { readonly kind: 'permanent'; readonly reason: PermanentReason };

/**
 * Structured error code → rule. Keys are lower-case; codes are matched case-insensitively (exact key
 * first, then the lower-cased code). Only own properties count, so codes such as `constructor` or
 * `__proto__` never hit `Object.prototype`.
 */
export type CodeTable = Readonly<Record<string, CodeRule>>;

const rateLimited: CodeRule = Object.freeze({ kind: 'rate_limited' });
const transient: CodeRule = Object.freeze({ kind: 'transient' });
const permanent = (reason: PermanentReason): CodeRule => Object.freeze({ kind: 'permanent', reason });

/**
 * The built-in code table: common codes of widely used HTTP APIs.
 *
 * | codes | rule |
 * | --- | --- |
 * | `rate_limit_exceeded`, `rate_limited`, `rate_limit_error`, `ratelimited`, `too_many_requests`, `throttled`, `throttlingexception`, `requestlimitexceeded`, `slowdown` | rate_limited |
 * | `spending_limit_exceeded`, `workspace_allowance_exhausted`, `insufficient_quota`, `billing_hard_limit_reached`, `billing_not_active` | permanent quota |
 * | `idempotency_key_in_use`, `lock_timeout`, `overloaded`, `overloaded_error`, `server_busy` | transient |
 * | `idempotency_key_reused`, `idempotency_error` | permanent conflict |
 * | `invalid_api_key`, `authentication_error`, `permission_denied`, `permission_error`, `account_deactivated` | permanent permission |
 * | `invalid_request_error`, `validation_error` | permanent invalid |
 * | `resource_missing`, `not_found_error` | permanent not_found |
 */
export const defaultCodeTable: CodeTable = Object.freeze({
  rate_limit_exceeded: rateLimited,
  rate_limited: rateLimited,
  rate_limit_error: rateLimited,
  ratelimited: rateLimited,
  too_many_requests: rateLimited,
  throttled: rateLimited,
  throttlingexception: rateLimited,
  requestlimitexceeded: rateLimited,
  slowdown: rateLimited,

  spending_limit_exceeded: permanent('quota'),
  workspace_allowance_exhausted: permanent('quota'),
  insufficient_quota: permanent('quota'),
  billing_hard_limit_reached: permanent('quota'),
  billing_not_active: permanent('quota'),

  idempotency_key_in_use: transient,
  lock_timeout: transient,
  overloaded: transient,
  overloaded_error: transient,
  server_busy: transient,

  idempotency_key_reused: permanent('conflict'),
  idempotency_error: permanent('conflict'),

  invalid_api_key: permanent('permission'),
  authentication_error: permanent('permission'),
  permission_denied: permanent('permission'),
  permission_error: permanent('permission'),
  account_deactivated: permanent('permission'),

  invalid_request_error: permanent('invalid'),
  validation_error: permanent('invalid'),

  resource_missing: permanent('not_found'),
  not_found_error: permanent('not_found'),
});

/**
 * A new table with the rules of `extra` added to (and replacing those of) `base`. Keys of `extra` are
 * lower-cased. Neither input is modified; the result is frozen.
 *
 * @param base - e.g. {@link defaultCodeTable}
 * @param extra - rules from configuration
 * @example
 * const codes = mergeCodeTables(defaultCodeTable, { daily_limit_reached: { kind: 'permanent', reason: 'quota' } });
 */
export function mergeCodeTables(base: CodeTable, extra: CodeTable): CodeTable {
  const merged: Record<string, CodeRule> = {};
  for (const table of [base, extra]) {
    for (const key of Object.keys(table)) {
      const rule = table[key];
      if (rule !== undefined) {
        // defineProperty, so a key such as `__proto__` becomes an ordinary own entry.
        Object.defineProperty(merged, key.toLowerCase(), {
          value: rule,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    }
  }
  return Object.freeze(merged);
}

/**
 * The rule for a structured error code, or `undefined` when the table does not know it.
 *
 * @param table - the code table
 * @param code - the provider's code, any case
 */
export function lookupCode(table: CodeTable, code: string | undefined): CodeRule | undefined {
  if (typeof code !== 'string' || code.length === 0) return undefined;
  const rule = ownRule(table, code) ?? ownRule(table, code.toLowerCase());
  return isCodeRule(rule) ? rule : undefined;
}

function ownRule(table: CodeTable, key: string): unknown {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

const permanentReasonSet: ReadonlySet<string> = new Set(permanentReasons);

/** A malformed rule (from unchecked configuration) is ignored rather than trusted. */
function isCodeRule(value: unknown): value is CodeRule {
  if (typeof value !== 'object' || value === null) return false;
  const kind = (value as { kind?: unknown }).kind;
  if (kind === 'rate_limited' || kind === 'transient') return true;
  return kind === 'permanent' && permanentReasonSet.has(String((value as { reason?: unknown }).reason));
}
