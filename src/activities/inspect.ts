/**
 * The inspection activity: a read-only lookup of the saved operation at the provider, keyed by the idempotency
 * key. It runs on its own task queue per credential (reserved capacity), after an unknown outcome and before any
 * re-dispatch (invariant 5).
 */
import { z } from 'zod';
import { dispatchFailure } from '../failures.js';
import { describeTarget } from '../intent.js';
import type { InspectionSpec, JsonValue } from '../intent.js';
import { classifyInspection, defaultCodeTable, mergeCodeTables } from '../policy/index.js';
import type { CodeTable, Evidence } from '../policy/index.js';
import { credentialedCall, reportToGates } from './deps.js';
import type { ActivityDeps } from './deps.js';

export interface InspectInput {
  idempotencyKey: string;
  credential: string;
  inspection: InspectionSpec;
  timeoutMs: number;
  codes?: CodeTable | undefined;
}

/** What the provider holds under the idempotency key. */
export type InspectResult =
  | { kind: 'absent' }
  | { kind: 'succeeded'; result: JsonValue }
  | { kind: 'failed'; error: { status?: number | undefined; code?: string | undefined; message?: string | undefined } }
  | { kind: 'pending'; state: string };

const storedErrorSchema = z.object({
  status: z.number().int().min(100).max(599).optional(),
  code: z.union([z.string(), z.number()]).transform(String).optional(),
  message: z.string().optional(),
});

/** Reads a dotted path (`data.status`) from a JSON value. */
function field(body: unknown, path: string): unknown {
  let v: unknown = body;
  for (const key of path.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, key)) return undefined;
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

export function makeInspect(deps: ActivityDeps) {
  return async function inspect(input: InspectInput): Promise<InspectResult> {
    const spec = input.inspection;
    const url = spec.url.split('{idempotencyKey}').join(encodeURIComponent(input.idempotencyKey));
    const target = describeTarget('GET', url);
    const codes = input.codes ? mergeCodeTables(defaultCodeTable, input.codes) : defaultCodeTable;
    const outcome = await credentialedCall(deps, input.credential, target, {
      method: 'GET',
      url,
      headers: { 'user-agent': deps.userAgent ?? 'retryq', accept: 'application/json' },
      timeoutMs: input.timeoutMs,
      purpose: 'inspect',
    });
    const found = classifyInspection(outcome.evidence, { codes, now: new Date(deps.clock()) });
    if (found.kind === 'inspection_failed')
      await reportToGates(deps, input.credential, 'inspect', outcome.evidence, found.decision);
    if (found.kind === 'operation_absent') return { kind: 'absent' };
    if (found.kind === 'inspection_failed')
      throw dispatchFailure(outcome.evidence, found.decision, target, outcome.message);
    if (outcome.kind !== 'response') throw new Error('unreachable: found without a response');

    const state = field(outcome.body, spec.stateField);
    if (typeof state !== 'string') {
      // A 2xx we cannot read: treat it as a passing failure of the inspection, never as an answer.
      const evidence: Evidence = { ...outcome.evidence, code: 'unreadable_inspection_response' };
      throw dispatchFailure(
        evidence,
        { kind: 'transient', reason: 'unreadable_inspection_response', retryAfter: { kind: 'absent' } },
        target,
        `field "${spec.stateField}" is missing or not a string`,
      );
    }
    if (spec.succeeded.includes(state))
      return { kind: 'succeeded', result: (field(outcome.body, spec.resultField) ?? null) as JsonValue };
    if (spec.failed.includes(state)) {
      const parsed = storedErrorSchema.safeParse(field(outcome.body, spec.errorField) ?? {});
      const error = parsed.success ? parsed.data : {};
      return { kind: 'failed', error };
    }
    return { kind: 'pending', state: state.slice(0, 100) };
  };
}
