/**
 * The local activity the intent workflow runs before a dispatch: is the credential's gate known closed in this worker
 * process? If so the intent waits durably right away, in the same workflow task, instead of scheduling a dispatch
 * that load control would only hold. At volume this is the common case: one rate-limit answer closes the gate, and
 * every intent submitted or woken before it opens would otherwise cost a dispatch activity, a slot request to the
 * credential's entity and a second workflow task to learn the same thing.
 *
 * It reads {@link CredentialGates.heldHint} only: no network, no provider call, nothing sent.
 */
import type { CredentialHold } from '../failures.js';
import type { ActivityDeps } from './deps.js';

export interface GateHintInput {
  credential: string;
  /** The intent's workflow time (ms since the epoch): the clock the credential's entity counts on too. */
  nowMs: number;
}

/** `held`: wait until the gate opens (nothing was sent, no attempt); `ask`: dispatch as usual. */
export type GateHintAnswer = { kind: 'held'; hold: CredentialHold } | { kind: 'ask' };

export function makeGateHint(deps: ActivityDeps) {
  return function gateHint(input: GateHintInput): Promise<GateHintAnswer> {
    const hold = deps.gates?.heldHint(input.credential, 'dispatch', input.nowMs);
    return Promise.resolve(hold ? { kind: 'held', hold } : { kind: 'ask' });
  };
}
