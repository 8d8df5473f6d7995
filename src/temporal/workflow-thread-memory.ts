/**
 * The heap of the SDK's workflow thread. The Temporal SDK starts the thread that runs workflow code itself and offers
 * no option for its heap; V8 reads `--max-semi-space-size` and `--max-old-space-size` when a thread's heap is
 * created, so the flags are set just while the worker (and with it the thread) is created, and put back afterwards.
 *
 * @example
 * ```ts
 * const worker = await withWorkflowThreadHeap({ semiSpaceMb: 2, oldSpaceMb: 256 }, () => Worker.create({ … }));
 * ```
 */
import v8 from 'node:v8';

/** The bounds of a thread's V8 heap, in MB; `0` leaves V8's own sizing. */
export interface ThreadHeapBounds {
  /** One semi-space of the young generation (`--max-semi-space-size`). */
  semiSpaceMb: number;
  /** The old generation (`--max-old-space-size`). */
  oldSpaceMb: number;
}

const flagNames: Record<keyof ThreadHeapBounds, string> = {
  semiSpaceMb: 'max-semi-space-size',
  oldSpaceMb: 'max-old-space-size',
};

/**
 * The value of a V8 size flag this process was started with (node flags or NODE_OPTIONS), in MB; 0 when none (V8
 * sizes that part of the heap itself).
 */
export function startupFlagMb(flag: string): number {
  const flags = [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)].join(' ');
  const pattern = flag.replace(/-/g, '[-_]');
  const m = new RegExp(`--${pattern}[= ](\\d+)`).exec(flags);
  return m ? Number(m[1]) : 0;
}

/** The `--max-semi-space-size` this process was started with, in MB; 0 when none. */
export function startupSemiSpaceMb(): number {
  return startupFlagMb(flagNames.semiSpaceMb);
}

/**
 * Runs `create` (which starts the SDK's workflow thread) with V8's heap bounds set to `bounds`, so the new thread's
 * heap is bounded, then puts the process's own settings back: V8 reads the flags when a thread's heap is created, so
 * the threads already running and those started later keep their sizing. A bound of `0` is left as it is.
 */
export async function withWorkflowThreadHeap<T>(bounds: ThreadHeapBounds, create: () => Promise<T>): Promise<T> {
  const set = (Object.keys(flagNames) as (keyof ThreadHeapBounds)[]).filter((k) => bounds[k] > 0);
  for (const k of set) v8.setFlagsFromString(`--${flagNames[k]}=${bounds[k]}`);
  try {
    return await create();
  } finally {
    for (const k of set) v8.setFlagsFromString(`--${flagNames[k]}=${startupFlagMb(flagNames[k])}`);
  }
}

/** {@link withWorkflowThreadHeap} for the young generation alone. */
export function withWorkflowThreadSemiSpace<T>(semiSpaceMb: number, create: () => Promise<T>): Promise<T> {
  return withWorkflowThreadHeap({ semiSpaceMb, oldSpaceMb: 0 }, create);
}
