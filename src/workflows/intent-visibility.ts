/**
 * What the intent workflow shows of itself: its search attributes (upserted only when they change), the UI's
 * one-sentence details, and retryq's counters through the SDK's workflow metric meter.
 */
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type {
  SearchAttributeKey,
  SearchAttributeType,
  SearchAttributeUpdatePair,
} from '@temporalio/common/lib/search-attributes.js';
import type { IntentSpec } from '../intent-status.js';
import type { IntentCount, IntentState } from '../policy/intent-machine.js';
import { intentDetails } from '../policy/intent-text.js';
import {
  credentialKey,
  lastErrorCodeKey,
  nextAttemptAtKey,
  retryAttemptKey,
  retryPhaseKey,
} from '../search-attributes.js';
import {
  countAttempt,
  countEnded,
  countHeld,
  countInspection,
  countRateLimited,
  countStalled,
} from './intent-metrics.js';

/** `LastErrorCode` of an intent whose dispatch no worker has started within the stall time. */
export const NO_WORKER_CODE = 'no_worker';

/**
 * Search attributes and the UI's details. Upserts only the attributes whose values differ from what the run
 * holds (the client's start values, or the previous run's), so a step that changes none adds no history event.
 */
export function publishStatus(state: IntentState, spec: IntentSpec): void {
  const s = state.status;
  const ev = s.lastEvidence;
  const errorCode = ev
    ? (ev.code ?? (ev.status ? `http_${ev.status}` : ev.transport ? `transport_${ev.transport}` : null))
    : null;
  const held = workflowInfo().typedSearchAttributes;
  const updates: SearchAttributeUpdatePair[] = [];
  const put = <T extends string | number | Date>(key: SearchAttributeKey<SearchAttributeType>, value: T | null) => {
    const now = held.get(key) as T | undefined;
    const same =
      value === null
        ? now === undefined
        : value instanceof Date
          ? now instanceof Date && now.getTime() === value.getTime()
          : now === value;
    if (!same) updates.push({ key, value } as SearchAttributeUpdatePair);
  };
  // A call about to start publishes with it: the phase between steps of one workflow task is not worth a write.
  put(retryPhaseKey, s.phase);
  put(retryAttemptKey, s.attempts);
  put(credentialKey, s.credential);
  put(nextAttemptAtKey, s.nextAttemptAt ? new Date(s.nextAttemptAt) : null);
  // A stalled dispatch is found with LastErrorCode="no_worker"; the code goes once a worker has answered.
  if (s.stalled) put(lastErrorCodeKey, NO_WORKER_CODE);
  else if (errorCode !== null && ev?.decision !== 'success') put(lastErrorCodeKey, errorCode);
  else if (held.get(lastErrorCodeKey) === NO_WORKER_CODE) put(lastErrorCodeKey, null);
  if (updates.length > 0) upsertSearchAttributes(updates);
  setCurrentDetails(intentDetails(state, spec, Date.now()));
}

/** Emits what a step of the state machine counted (the SDK emits nothing while a workflow replays). */
export function countOf(credential: string, c: IntentCount): void {
  {
    switch (c.metric) {
      case 'attempt':
        return countAttempt(credential, c.decision);
      case 'rate_limited':
        return countRateLimited(credential, c.kind);
      case 'inspection':
        return countInspection(credential, c.result);
      case 'held':
        return countHeld(credential, c.reason);
      case 'stalled':
        return countStalled(credential);
      case 'ended':
        return countEnded(credential, c.phase);
    }
  }
}
