/**
 * The entry of the bundle retryq's own workers run for intents (`intentWorkflowBundle` in src/worker.ts): the workflows
 * of `retryq/workflows` (./index.ts), plus one setting of the workflow thread that only retryq's own workers make. An
 * application that serves the intent workflow from its own worker bundles ./index.ts and keeps its thread as it is.
 *
 * **Stack frames per error: 1** (V8's default is 10). The Temporal SDK records where every promise of workflow code
 * was created, for the Temporal UI's "Stack Trace" tab: at each promise it captures a stack and maps each frame
 * through the bundle's source map. An intent creates dozens of promises per workflow task (its own awaits and the
 * SDK's timers, conditions and cancellation scopes), so that bookkeeping was a quarter of the worker's CPU per intent
 * put to sleep (docs/benchmarks.md, "Volume"). With one frame an error thrown in intent code still says where
 * (function, file and line), and the UI's stack trace of an intent shows the innermost frame of each pending promise;
 * what an intent is doing and why is in its status and the UI's current details, not in its stack.
 *
 * retryq preloads this entry (`preloadModules`), so the setting is made once, when the workflow thread's context is
 * created, before any workflow runs.
 */
export * from './index.js';

/** Frames V8 records per stack trace in the intents' workflow thread. */
export const INTENT_THREAD_STACK_FRAMES = 1;
Error.stackTraceLimit = INTENT_THREAD_STACK_FRAMES;
