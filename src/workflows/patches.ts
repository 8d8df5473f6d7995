/**
 * The intent workflow's patch ids, in a module of their own: the workflow reads them, and so does the worker's patch
 * activation callback on the main thread (src/load-control/gate-check-patch.ts), which does not load workflow code.
 *
 * Behaviour added after a release, each guarded by `patched(id)` so that runs started by an older worker replay
 * the commands their history holds (docs/operations.md, "Upgrading the intent workflow"). A patch is retired with
 * `deprecatePatch(id)` once no run that began before it can still be replayed, then removed.
 */
export const IntentPatch = {
  /** 0.2.0: a call that was never sent (connection refused, DNS failure) uses no attempt; backed off to the deadline. */
  neverSentIsNoAttempt: 'retryq-0.2-never-sent-is-no-attempt',
  /** 0.2.0: a cancel signal during a dispatch cancels the activity, which aborts its HTTP request. */
  cancelAbortsDispatch: 'retryq-0.2-cancel-aborts-dispatch',
  /**
   * 0.3.0: the gate check (`IntentWorkflowOptions.localGateCheck`) before a run's first dispatch. Guarded by a
   * patch as well as the start option: a current client may start an intent that an older worker runs first (it
   * ignores the option and schedules the dispatch at once); a current worker that takes the run over must replay that
   * part without the check. Since 0.4.0 the worker records it only when its process knows the credential's gate
   * closed (its `patchActivationCallback`, src/load-control/gate-check-patch.ts): an intent whose gate is open
   * dispatches with no marker, no version upsert and no local activity. In 0.3.0 histories it is recorded at every
   * run's first dispatch and also covers the later dispatches of that run.
   */
  localGateCheck: 'retryq-0.3-local-gate-check',
  /**
   * 0.4.0: the gate check before every later dispatch of a run (after a wait), in runs whose first dispatch went
   * without it. Recorded once per such run, at its first dispatch after a wait.
   */
  gateCheckAfterWait: 'retryq-0.4-gate-check-after-wait',
} as const;

/** The credential entity's patch ids (src/workflows/credential.ts). */
export const CredentialPatch = {
  /**
   * 0.5.0: the entity keeps its dispatch gate in its memo (`dispatchGate`), so that a client can learn it with a
   * describe (the server alone answers) and hold an intent at submit while the gate is closed.
   */
  gateMemo: 'retryq-0.5-credential-gate-memo',
} as const;
