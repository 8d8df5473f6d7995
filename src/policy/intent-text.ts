/**
 * The intent's state as people read it: the UI's one-sentence details, the failure message of an intent that did
 * not succeed, and the answer to "retry now". Pure: the state and the time are parameters.
 *
 * @example
 * ```ts
 * import { intentDetails } from './intent-text.js';
 * intentDetails(state, spec, Date.now()); // 'Waiting for provider until 12:24:30 UTC (Retry-After 300 s, attempt 1/10).'
 * ```
 *
 * @module
 */
import { evidenceText, retryAfterText } from './evidence-text.js';
import type { IntentState } from './intent-machine.js';
import { Phase, describeTarget, describeWebhookEntry, finalPhases } from '../intent-status.js';
import type { IntentSpec } from '../intent-status.js';

/** What "retry now" did: when the next attempt will really run, and why not sooner. */
export interface RetryNowAnswer {
  /** The intent's phase when the request arrived. */
  phase: Phase;
  /** When the next provider call will run (ISO); `null` while one runs now. */
  nextAttemptAt: string | null;
  /**
   * `now`: at once; `server_floor`: the provider's Retry-After permits it no sooner; `gate`: the credential's gate
   * is closed after a rate limit until then; `blocked`: the credential is blocked until an operator resumes it
   * (the call is held again); `in_progress`: a call runs now.
   */
  why: 'now' | 'server_floor' | 'gate' | 'blocked' | 'in_progress';
  /** The same, as a sentence for people. */
  message: string;
}

function lastText(state: IntentState): string {
  const ev = state.status.lastEvidence;
  return ev ? evidenceText(ev) : 'no answer yet';
}

/** Why a call that was never sent was not sent, for the status line. */
function unsentBecause(code: string | undefined, credential: string): string {
  if (code === 'credential_unavailable') return `no worker has the secret of credential ${credential}`;
  if (code === 'worker_shutdown') return 'the worker shut down before sending';
  return 'provider unreachable';
}

/** A sentence a person understands: what the intent is doing, until when, and why (the UI's details). */
export function intentDetails(state: IntentState, spec: IntentSpec, nowMs: number): string {
  const s = state.status;
  const target = describeTarget(spec.action.method, spec.action.url);
  const attempt = `attempt ${s.attempts}/${s.maxAttempts}`;
  // Time of day, with the date when it is not today (waits may last days).
  const today = new Date(nowMs).toISOString().slice(0, 10);
  const clock = (iso: string | undefined) =>
    iso ? `${iso.slice(0, 10) === today ? '' : `${iso.slice(0, 10)} `}${iso.slice(11, 19)} UTC` : '?';
  const last = lastText(state);
  switch (s.phase) {
    case Phase.scheduled:
      return `Scheduled: ${target}, first attempt due now.`;
    case Phase.dispatching:
      if (s.stalled)
        return (
          `No worker has served credential ${s.credential} since ${clock(s.stalled.since)}: ${attempt} waits on ` +
          `task queue ${s.stalled.taskQueue} and nothing was sent. Start a worker that has this credential ` +
          `(RETRYQ_CREDENTIALS), or cancel the intent (it ends at once); it expires at its deadline ${clock(s.deadline)}.`
        );
      return `Sending ${target} (${attempt}).`;
    case Phase.inspecting:
      return `Checking with the provider whether attempt ${s.attempts} took effect (inspection ${s.inspections}) before anything else is sent.`;
    case Phase.waiting: {
      const held = s.held;
      if (held?.reason === 'rate_limited')
        return (
          `Waiting: credential ${held.credential} is rate limited until ${clock(held.until)}` +
          `${held.why ? ` (${held.why})` : ''}; this intent's turn comes at ${clock(s.nextAttemptAt)}. ` +
          `Nothing was sent and no attempt was used (${attempt} so far).`
        );
      if (held?.reason === 'paced')
        return (
          `Waiting for a send slot of credential ${held.credential} at ${clock(s.nextAttemptAt)}: its budget is in ` +
          `use${held.why ? ` (${held.why})` : ''}. Nothing was sent (${attempt} so far).`
        );
      if (held?.reason === 'blocked')
        return (
          `Held: credential ${held.credential} is blocked (${held.why ?? 'quota'}) until an operator runs ` +
          `\`retryq credentials resume ${held.credential}\`. Nothing is sent; the intent expires at its deadline ` +
          `${clock(s.deadline)} (${attempt} so far).`
        );
      const ev = s.lastEvidence;
      if (s.unreachableSince !== undefined && ev?.sent === 'no')
        return (
          `Waiting: ${unsentBecause(ev.code, s.credential)} ` +
          `since ${clock(s.unreachableSince)} (${last}); nothing was sent and no attempt was used. ` +
          `Next try at ${clock(s.nextAttemptAt)} (${attempt} so far; gives up at the deadline ${clock(s.deadline)}).`
        );
      const what = state.needsInspection ? 'to inspect the unknown outcome' : 'for provider';
      const why =
        ev?.retryAfter !== undefined && state.permittedAtMs !== undefined && s.nextAttemptAt === s.permittedAt
          ? `Retry-After ${retryAfterText(ev.retryAfter)}`
          : `backoff after ${last}`;
      return `Waiting ${what} until ${clock(s.nextAttemptAt)} (${why}, ${attempt}).`;
    }
    case Phase.succeeded:
      return s.resolvedByWebhook
        ? `Succeeded: ${describeWebhookEntry(s.resolvedByWebhook)} from ${s.resolvedByWebhook.source}, after ${s.attempts} attempt${s.attempts === 1 ? '' : 's'}; no inspection needed.`
        : `Succeeded after ${s.attempts} attempt${s.attempts === 1 ? '' : 's'}.`;
    default:
      return `${s.phase[0]!.toUpperCase()}${s.phase.slice(1)}: ${s.finalReason ?? 'no reason recorded'}.${
        s.reservation ? ` Reservation to reconcile: ${s.reservation.reason}.` : ''
      }`;
  }
}

/**
 * The failure message of an intent that ended without success (the UI shows it): what happened, the last evidence
 * and any reservation, then where the full outcome is.
 */
export function failureSentence(state: IntentState, spec: IntentSpec): string {
  const s = state.status;
  const target = describeTarget(spec.action.method, spec.action.url);
  const reason = s.finalReason ?? 'no reason recorded';
  const what =
    s.phase === Phase.expired
      ? `Expired: ${target} was not delivered by the deadline`
      : s.phase === Phase.cancelled
        ? `Cancelled: ${target} will not be sent again`
        : `Failed: ${target} was not delivered`;
  const text = lastText(state);
  const last = !s.lastEvidence ? ' Nothing was sent.' : reason.includes(text) ? '' : ` Last answer: ${text}.`;
  const reservationText = s.reservation
    ? ` Reservation to reconcile: ${s.reservation.reason}; check the operation with idempotency key ${s.reservation.idempotencyKey} at the provider.`
    : ' No reservation is left to reconcile.';
  return (
    `${what} (${reason}).${last}${reservationText} ` +
    `The full outcome (attempts, evidence, log) is in this failure's details and \`retryq status ${spec.idempotencyKey}\`.`
  );
}

/** The answer to "retry now", computed the way the state machine acts on it. */
export function retryNowAnswer(state: IntentState, nowMs: number): RetryNowAnswer {
  const s = state.status;
  const iso = (ms: number) => new Date(ms).toISOString();
  const answer = (why: RetryNowAnswer['why'], at: number | null, message: string): RetryNowAnswer => ({
    phase: s.phase,
    nextAttemptAt: at === null ? null : iso(at),
    why,
    message,
  });
  if (s.phase === Phase.dispatching || s.phase === Phase.inspecting || finalPhases.has(s.phase))
    return answer(
      'in_progress',
      null,
      finalPhases.has(s.phase)
        ? `The intent is ending (${s.phase}); nothing more will be sent.`
        : `A provider call runs now (${s.phase}, attempt ${s.attempts}/${s.maxAttempts}); nothing to shorten.`,
    );
  const dueAtMs = state.dueAtMs ?? state.heldAtSubmit?.wakeAtMs;
  if (dueAtMs === undefined || s.phase === Phase.scheduled) return answer('now', nowMs, 'The next call runs now.');
  if (s.held?.reason === 'blocked')
    return answer(
      'blocked',
      nowMs,
      `Credential ${s.credential} is blocked (${s.held.why ?? 'quota'}): the call runs now but is held again ` +
        `until an operator runs \`retryq credentials resume ${s.credential}\`.`,
    );
  const earliest = Math.min(dueAtMs, Math.max(nowMs, state.permittedAtMs ?? 0));
  if (earliest <= nowMs) return answer('now', nowMs, 'The next call runs now.');
  const gateUntil = s.held?.reason === 'rate_limited' && s.held.until ? Date.parse(s.held.until) : 0;
  if (gateUntil >= earliest)
    return answer(
      'gate',
      earliest,
      `Credential ${s.credential} is rate limited until ${iso(gateUntil)}${s.held?.why ? ` (${s.held.why})` : ''}: ` +
        `the next call runs at ${iso(earliest)}, not sooner.`,
    );
  return answer(
    'server_floor',
    earliest,
    `The provider permits the next call no sooner than ${iso(earliest)}` +
      `${s.lastEvidence?.retryAfter ? ` (Retry-After ${s.lastEvidence.retryAfter})` : ''}: it runs then.`,
  );
}
