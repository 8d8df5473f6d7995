/**
 * The workflows worker's patch activation callback: the first dispatch's gate check is turned on only when this
 * process knows the intent's credential gate closed; every other patch keeps Temporal's default (on). The real path
 * (a real CredentialGates, entity and server) is in test/e2e/intent-gate-check.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { TypedSearchAttributes } from '@temporalio/common';
import type { PatchActivationInput } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import { gateCheckPatchDecision } from '../../../src/load-control/gate-check-patch.js';
import type { CredentialGates } from '../../../src/load-control/credential-gates.js';
import { credentialKey } from '../../../src/search-attributes.js';
import { IntentPatch } from '../../../src/workflows/patches.js';

const startedAt = new Date('2026-12-01T12:00:00Z');

function input(
  patchId: string,
  over: { workflowType?: string; credential?: string | null } = {},
): PatchActivationInput {
  const credential = over.credential === undefined ? 'acme' : over.credential;
  const workflowInfo = {
    workflowType: over.workflowType ?? 'intentWorkflow',
    runStartTime: startedAt,
    typedSearchAttributes: new TypedSearchAttributes(
      credential === null ? [] : [{ key: credentialKey, value: credential }],
    ),
  } as unknown as WorkflowInfo;
  return { workflowInfo, patchId };
}

/** Load control that knows `closedUntil` (entity clock) for credential `acme`, and records what it was asked. */
function gates(closedUntil: number) {
  const asked: Array<[string, string, number]> = [];
  const g = {
    knownClosedAfter(credential: string, kind: string, sinceMs: number) {
      asked.push([credential, kind, sinceMs]);
      return credential === 'acme' && closedUntil > sinceMs;
    },
  } as unknown as CredentialGates;
  return { g, asked };
}

describe('the gate-check patch decision', () => {
  it("turns the first dispatch's check on when the gate is known closed past the run's start, off when not", () => {
    const closed = gates(startedAt.getTime() + 60_000);
    expect(gateCheckPatchDecision(closed.g)(input(IntentPatch.localGateCheck))).toBe(true);
    expect(closed.asked).toEqual([['acme', 'dispatch', startedAt.getTime()]]);
    const opened = gates(startedAt.getTime() - 1);
    expect(gateCheckPatchDecision(opened.g)(input(IntentPatch.localGateCheck))).toBe(false);
    expect(gateCheckPatchDecision(opened.g)(input(IntentPatch.localGateCheck, { credential: 'other' }))).toBe(false);
  });

  it('leaves the check off without load control or without a credential attribute', () => {
    expect(gateCheckPatchDecision(undefined)(input(IntentPatch.localGateCheck))).toBe(false);
    const closed = gates(Number.MAX_SAFE_INTEGER);
    expect(gateCheckPatchDecision(closed.g)(input(IntentPatch.localGateCheck, { credential: null }))).toBe(false);
    expect(closed.asked).toEqual([]);
  });

  it('turns every other patch on, and the same id in another workflow type', () => {
    const open = gates(0);
    const decide = gateCheckPatchDecision(open.g);
    for (const id of [
      IntentPatch.gateCheckAfterWait,
      IntentPatch.neverSentIsNoAttempt,
      IntentPatch.cancelAbortsDispatch,
    ])
      expect(decide(input(id))).toBe(true);
    expect(decide(input(IntentPatch.localGateCheck, { workflowType: 'webhookOrphanWorkflow' }))).toBe(true);
    expect(gateCheckPatchDecision(undefined)(input(IntentPatch.gateCheckAfterWait))).toBe(true);
    expect(open.asked).toEqual([]);
  });
});
