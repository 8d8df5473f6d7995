/** What the activities need from the worker process, injected by `createActivities` (tests pass their own). */
import { Context } from '@temporalio/activity';
import type { Dispatcher } from 'undici';
import { credentialHeldFailure, dispatchFailure } from '../failures.js';
import type { CredentialHold } from '../failures.js';
import { describeEvidence } from '../policy/evidence-text.js';
import { parseRateLimitHeaders } from '../policy/index.js';
import type { Decision, Evidence, LearnedLimit, Purpose } from '../policy/index.js';
import { whileHeartbeating } from './heartbeat.js';
import { callProvider, secretsOf } from './provider-call.js';
import type { ProviderCall, ProviderOutcome } from './provider-call.js';

/** Turns a credential id into the request headers that authenticate it. Secrets stay inside. */
export interface CredentialStore {
  /** Throws when the worker has no secret for `credential`. */
  authHeaders(credential: string): Record<string, string>;
}

/** What load control answers right before a call is sent: send it now, or hold it (nothing is sent; no attempt). */
export type Admission = { kind: 'go' } | { kind: 'held'; hold: CredentialHold };

/**
 * What the activities need of the credential's load control (src/load-control/ implements it for every worker
 * process): the one question right before sending, and what an answer means for the whole credential.
 */
export interface LoadControl {
  /** Waits for a send slot of `kind`; `held` when the gate is closed, the credential blocked, or no slot comes soon. */
  admit(credential: string, kind: Purpose, signal?: AbortSignal): Promise<Admission>;
  /** A rate-limit answer: close the credential's gate of `kind` for `delayMs` in every process. */
  rateLimited(credential: string, kind: Purpose, delayMs: number, reason: string): Promise<void>;
  /** A quota or spending-limit answer: block the credential's dispatches until an operator resumes it. */
  blocked(credential: string, reason: string, code: string | undefined): Promise<void>;
  /**
   * What the rate-limit headers of an answer of `kind` said (any answer, success included; only `limit` readings are
   * reported): load control paces by the stated quota and closes the scope's gate when none is left, before a 429.
   * `sentAtMs`: when the call was sent (the activity's clock), so `remaining` can be set against the calls sent since.
   */
  learned(
    credential: string,
    kind: Purpose,
    learned: Extract<LearnedLimit, { kind: 'limit' }>,
    sentAtMs: number,
  ): Promise<void>;
  /** The header the credential's config names as its provider's bucket header, if any. */
  bucketHeaderOf?(credential: string): string | undefined;
}

export interface ActivityDeps {
  /** The HTTP connection pool (an undici `Agent`, keep-alive). */
  http: Dispatcher;
  credentials: CredentialStore;
  /** ms since the epoch. @default Date.now */
  clock: () => number;
  /** @default 'retryq' */
  userAgent?: string;
  /** Load control per credential (send slots, the shared gate, blocks). Without it every call is sent at once. */
  loadControl?: LoadControl | undefined;
}

/**
 * How long an activity waits for its report to reach the credential's entity before it returns anyway (the report
 * goes on in the background, ahead of this process's next slot request; this process's own gate is closed already).
 * The intent's own wait counts from when its workflow sees the answer, so a slow report must not delay that.
 */
export const REPORT_WAIT_MS = 500;

function settledOrAfter(report: Promise<void>): Promise<void> {
  return Promise.race([report, new Promise<void>((resolve) => setTimeout(resolve, REPORT_WAIT_MS).unref())]);
}

/** How long a rate-limit answer without a usable `Retry-After` closes the credential's gate. */
export const GATE_FLOOR_MS = 2_000;

/**
 * Waits for the credential's load control to let a call through; throws the `CredentialHeld` failure (nothing sent,
 * not an attempt) when it holds the call instead.
 */
export async function admitCall(
  deps: ActivityDeps,
  credential: string,
  method: string,
  purpose: Purpose,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (!deps.loadControl) return;
  const admission = await deps.loadControl.admit(credential, purpose, signal);
  if (admission.kind === 'held') throw credentialHeldFailure(admission.hold, method, purpose);
}

/**
 * Tells load control what an answer means for the whole credential: a rate limit closes its gate until the permitted
 * time (every process); a quota or spending-limit answer blocks its dispatches until an operator resumes it.
 */
export async function reportToGates(
  deps: ActivityDeps,
  credential: string,
  purpose: Purpose,
  evidence: Evidence,
  decision: Decision,
): Promise<void> {
  if (!deps.loadControl) return;
  if (decision.kind === 'rate_limited') {
    const ra = decision.retryAfter;
    const now = deps.clock();
    const delayMs =
      ra.kind === 'delay' || ra.kind === 'date' ? Math.max(0, ra.notBefore.getTime() - now) : GATE_FLOOR_MS;
    await settledOrAfter(
      deps.loadControl.rateLimited(
        credential,
        purpose,
        delayMs > 0 ? delayMs : GATE_FLOOR_MS,
        describeEvidence(evidence),
      ),
    );
  } else if (decision.kind === 'permanent' && decision.reason === 'quota' && purpose === 'dispatch') {
    await settledOrAfter(deps.loadControl.blocked(credential, describeEvidence(evidence), evidence.code));
  }
}

/**
 * Reads the rate-limit headers of an answer once and tells load control what they say (every answer, success
 * included). Nothing of it enters the evidence or the workflow's history.
 */
export async function reportLearned(
  deps: ActivityDeps,
  credential: string,
  purpose: Purpose,
  outcome: ProviderOutcome,
  sentAtMs: number,
): Promise<void> {
  const lc = deps.loadControl;
  if (!lc || outcome.kind !== 'response') return;
  const learned = parseRateLimitHeaders(outcome.rateLimitHeaders, {
    nowMs: outcome.evidence.receivedAtMs ?? deps.clock(),
    bucketHeader: lc.bucketHeaderOf?.(credential),
  });
  if (learned.kind === 'none') return;
  await settledOrAfter(lc.learned(credential, purpose, learned, sentAtMs));
}

/**
 * The credential's auth headers, or the typed failure of a call that was never sent because this worker has no
 * secret for it: a configuration problem an operator can fix, so the workflow backs off and tries again.
 */
export function credentialHeaders(
  deps: ActivityDeps,
  credential: string,
  method: string,
  purpose: Purpose,
  target: string,
): Record<string, string> {
  try {
    return deps.credentials.authHeaders(credential);
  } catch (err) {
    const evidence: Evidence = { method, purpose, transport: 'other', sent: 'no', code: 'credential_unavailable' };
    throw dispatchFailure(
      evidence,
      { kind: 'transient', reason: 'credential_unavailable', retryAfter: { kind: 'absent' } },
      target,
      (err as Error).message,
    );
  }
}

/**
 * One provider call made with a credential, as dispatch and inspection both make it: the credential's auth headers
 * (its secrets cut from anything the provider quotes back), a slot from the credential's load control, and
 * heartbeats while waiting for the slot and the answer (a dead worker is noticed in seconds, a cancel aborts the call).
 */
export function credentialedCall(
  deps: ActivityDeps,
  credential: string,
  target: string,
  call: Omit<ProviderCall, 'dispatcher' | 'clock' | 'signal' | 'redact'>,
): Promise<ProviderOutcome> {
  const auth = credentialHeaders(deps, credential, call.method, call.purpose, target);
  let sent = false;
  return whileHeartbeating(async (sending) => {
    const signal = Context.current().cancellationSignal;
    await admitCall(deps, credential, call.method, call.purpose, signal);
    // A cancel from here on aborts a request that may reach the provider: the call's evidence says so.
    if (signal.aborted) throw signal.reason;
    sending();
    sent = true;
    const sentAtMs = deps.clock();
    const outcome = await callProvider({
      ...call,
      headers: { ...call.headers, ...auth },
      dispatcher: deps.http,
      clock: deps.clock,
      signal,
      redact: secretsOf(auth),
      bucketHeader: deps.loadControl?.bucketHeaderOf?.(credential),
    });
    await reportLearned(deps, credential, call.purpose, outcome, sentAtMs);
    return outcome;
  }).catch((err: unknown) => {
    // The worker is shutting down (its drain grace ran out, or it stopped before this call got its slot) and nothing
    // left this process: not an attempt, not an unknown outcome. The intent tries again on a running worker.
    if (!sent && Context.current().cancellationDetails?.workerShutdown === true) {
      const evidence: Evidence = {
        method: call.method,
        purpose: call.purpose,
        transport: 'other',
        sent: 'no',
        code: 'worker_shutdown',
      };
      throw dispatchFailure(
        evidence,
        { kind: 'transient', reason: 'worker_shutdown', retryAfter: { kind: 'absent' } },
        target,
        'the worker shut down before sending the call; nothing was sent',
      );
    }
    throw err;
  });
}
