/**
 * The young generation of the SDK's workflow thread. The Temporal SDK starts the thread that runs workflow code
 * itself and offers no option for its heap; V8 reads `--max-semi-space-size` when a thread's heap is created, so the
 * flag is set just while the worker (and with it the thread) is created, and put back afterwards.
 *
 * @example
 * ```ts
 * const worker = await withWorkflowThreadSemiSpace(2, () => Worker.create({ workflowBundle, … }));
 * ```
 */
import v8 from 'node:v8';

/**
 * The `--max-semi-space-size` this process was started with (node flags or NODE_OPTIONS), in MB; 0 when none (V8
 * sizes the young generation itself).
 */
export function startupSemiSpaceMb(): number {
  const flags = [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)].join(' ');
  const m = /--max[-_]semi[-_]space[-_]size[= ](\d+)/.exec(flags);
  return m ? Number(m[1]) : 0;
}

/**
 * Runs `create` (which starts the SDK's workflow thread) with V8's semi-space size set to `semiSpaceMb`, so the new
 * thread's young generation is bounded, then puts the process's own setting back: V8 reads the flag when a thread's
 * heap is created, so the threads already running and those started later keep their sizing. `0` changes nothing.
 */
export async function withWorkflowThreadSemiSpace<T>(semiSpaceMb: number, create: () => Promise<T>): Promise<T> {
  if (semiSpaceMb === 0) return create();
  v8.setFlagsFromString(`--max-semi-space-size=${semiSpaceMb}`);
  try {
    return await create();
  } finally {
    v8.setFlagsFromString(`--max-semi-space-size=${startupSemiSpaceMb()}`);
  }
}
