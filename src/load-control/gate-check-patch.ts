/**
 * The workflows worker's patch activation callback: which patches a live (not replaying) intent run turns on.
 *
 * Every patch is on, as without a callback, except {@link IntentPatch.localGateCheck} at a run's first dispatch: it
 * is on only when this process knows the intent's credential gate closed. The gate check it guards is a local
 * activity plus a marker and a version upsert in the intent's history; it pays off when the gate is closed (the
 * intent sleeps in its first workflow task, no dispatch, no slot request) and is pure cost when the gate is open,
 * which is the common case at volume (docs/load-control.md, "The gate check"). Temporal records the answer in the
 * history (a marker when on, nothing when off), so a replay takes the same path whatever this process knows then.
 *
 * Runs on the worker's main thread, synchronously, while the workflow thread waits: a map lookup, nothing more.
 */
import type { PatchActivationInput } from '@temporalio/worker';
import { credentialKey } from '../search-attributes.js';
import { IntentPatch } from '../workflows/patches.js';
import type { CredentialGates } from './credential-gates.js';

/** The intent workflow's type name (the exported function's name in the bundle). */
const INTENT_WORKFLOW_TYPE = 'intentWorkflow';

/**
 * `gates` is this process's load control (undefined: the worker runs without it, so it never knows a gate closed).
 */
export function gateCheckPatchDecision(gates: CredentialGates | undefined) {
  return function decide({ workflowInfo, patchId }: PatchActivationInput): boolean {
    if (patchId !== IntentPatch.localGateCheck || workflowInfo.workflowType !== INTENT_WORKFLOW_TYPE) return true;
    const credential = workflowInfo.typedSearchAttributes.get(credentialKey);
    if (gates === undefined || typeof credential !== 'string') return false;
    // The run's start is a lower bound of the intent's workflow time (the clock the entity's closures count on): a
    // closure known to last past it may have ended since, in which case the check answers "ask" and costs only itself.
    return gates.knownClosedAfter(credential, 'dispatch', workflowInfo.runStartTime.getTime());
  };
}
