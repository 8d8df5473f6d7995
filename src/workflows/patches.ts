/**
 * The one registry of workflow patches: every behaviour change of a released workflow goes behind one named entry
 * here and one `patched(id)` call at the place the behaviour changes (docs/development.md, "Changing a released
 * workflow"). Each entry says the version it came in and why; a run that began before the change replays the commands
 * its history holds. An entry is retired with `deprecatePatch(id)` once no run that began before it can still be
 * replayed (the release notes say when), then removed.
 *
 * 0.2.0 is retryq's first release: no patch is needed yet. The replay fixtures of every release
 * (test/workflow/histories/) replay on the current code in CI.
 *
 * @example
 * ```ts
 * // 0.3.0 adds a step before the first dispatch:
 * export const IntentPatch = {
 *   // 0.3.0: <what changed and why>
 *   firstStep: 'retryq-0.3-first-step',
 * } as const;
 * // in the workflow, at the one place it changes:
 * if (patched(IntentPatch.firstStep)) await firstStep();
 * ```
 */

/** The intent workflow's patches (src/workflows/intent.ts). */
export const IntentPatch = {} as const;

/** The credential entity's patches (src/workflows/credential.ts). */
export const CredentialPatch = {} as const;
