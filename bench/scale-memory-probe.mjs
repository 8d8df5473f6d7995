// @ts-check
/**
 * Opt-in memory probe for the worker processes of `npm run bench:scale` (`BENCH_WORKER_MEMORY=1`): reports each
 * thread's V8 heap (the main thread and the SDK's workflow thread(s)) next to the process's RSS, so the RSS can be
 * split into V8 heaps and the rest (native: the SDK's Rust core, glibc arenas, code). Off by default: the bench then
 * runs exactly what `retryq worker` runs.
 *
 * Two roles: in the main thread, `install()` (bench/scale-worker.mjs) wraps `worker_threads.Worker` so every thread
 * the SDK starts loads this file first; as the entry of each such thread it answers probes, then loads the SDK's own
 * thread script.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import threads from 'node:worker_threads';
import v8 from 'node:v8';

const self = fileURLToPath(import.meta.url);

const CHANNEL = 'bench-scale-memory';
const mb = (/** @type {number} */ n) => Math.round((n / 2 ** 20) * 10) / 10;

function heapOfThisThread() {
  const h = v8.getHeapStatistics();
  const m = process.memoryUsage();
  /** @type {Record<string, number>} */
  const spaces = {};
  for (const s of v8.getHeapSpaceStatistics()) spaces[s.space_name] = mb(s.space_size);
  return {
    heapTotalMb: mb(h.total_heap_size),
    heapUsedMb: mb(h.used_heap_size),
    mallocedMb: mb(h.malloced_memory),
    externalMb: mb(m.external),
    arrayBuffersMb: mb(m.arrayBuffers),
    contexts: h.number_of_native_contexts,
    heapLimitMb: mb(h.heap_size_limit),
    physicalMb: mb(h.total_physical_size),
    spacesMb: spaces,
  };
}

if (!threads.isMainThread && threads.workerData && threads.workerData.__benchProbeTarget) {
  const target = threads.workerData.__benchProbeTarget;
  const channel = new threads.BroadcastChannel(CHANNEL);
  channel.unref();
  channel.onmessage = (/** @type {any} */ e) => {
    if (e.data === 'gc') globalThis.gc?.();
    if (e.data === 'probe') channel.postMessage({ threadId: threads.threadId, ...heapOfThisThread() });
  };
  createRequire(self)(target);
}

/** Makes every thread started from now on load this file first (the SDK's workflow threads among them). */
export function install() {
  const Original = threads.Worker;
  threads.Worker = class ProbedWorker extends Original {
    /** @param {string | URL} filename @param {import('node:worker_threads').WorkerOptions} [options] */
    constructor(filename, options = {}) {
      super(self, { ...options, workerData: { __benchProbeTarget: String(filename), ...options.workerData } });
    }
  };
}

/**
 * The process's anonymous memory by kind, from /proc/self/smaps: glibc's main arena (`[heap]`), its per-thread arenas
 * (mappings aligned to and reserved in 64 MB units), thread stacks, and the rest (V8's heap pages, the Rust core's
 * large allocations, code). Resident MB each, with the number of mappings.
 */
function nativeBreakdown() {
  const ARENA = 64 * 2 ** 20;
  /** @type {Record<string, { mb: number; maps: number }>} */
  const kinds = {};
  const add = (/** @type {string} */ k, /** @type {number} */ kb) => {
    const e = (kinds[k] ??= { mb: 0, maps: 0 });
    e.mb += kb / 1024;
    e.maps += 1;
  };
  let text;
  try {
    text = readFileSync('/proc/self/smaps', 'utf8');
  } catch {
    return undefined;
  }
  /** @type {{ start: number; end: number; perms: string; name: string; rss: number } | undefined} */
  let cur;
  const maps = [];
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      cur = {
        start: parseInt(head[1] ?? '0', 16),
        end: parseInt(head[2] ?? '0', 16),
        perms: head[3] ?? '',
        name: head[4] ?? '',
        rss: 0,
      };
      maps.push(cur);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && cur) cur.rss = Number(rss[1]);
  }
  for (const m of maps) {
    if (m.rss === 0) continue;
    if (m.name === '[heap]') add('mainArena', m.rss);
    else if (m.name.startsWith('[stack')) add('stacks', m.rss);
    else if (m.name !== '' && !m.name.startsWith('[anon')) add('fileBacked', m.rss);
    else if (m.start % ARENA === 0 && m.perms.startsWith('rw') && m.end - m.start <= ARENA) add('threadArenas', m.rss);
    else add('otherAnon', m.rss);
  }
  for (const e of Object.values(kinds)) e.mb = Math.round(e.mb * 10) / 10;
  return kinds;
}

/** The heaps of every thread, and the process's RSS. */
export async function probe(gcFirst = false) {
  const channel = new threads.BroadcastChannel(CHANNEL);
  if (gcFirst && globalThis.gc) {
    globalThis.gc();
    channel.postMessage('gc');
    await new Promise((r) => setTimeout(r, 1000));
  }
  /** @type {any[]} */
  const others = [];
  channel.onmessage = (/** @type {any} */ e) => others.push(e.data);
  channel.postMessage('probe');
  await new Promise((r) => setTimeout(r, 300));
  channel.close();
  const status = readFileSync('/proc/self/status', 'utf8');
  const kb = (/** @type {string} */ k) => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  const main = heapOfThisThread();
  const heaps = main.heapTotalMb + others.reduce((s, t) => s + t.heapTotalMb, 0);
  const rss = Math.round(kb('VmRSS') / 102.4) / 10;
  return {
    rssMb: rss,
    rssAnonMb: Math.round(kb('RssAnon') / 102.4) / 10,
    rssFileMb: Math.round(kb('RssFile') / 102.4) / 10,
    v8HeapsMb: Math.round(heaps * 10) / 10,
    restMb: Math.round((rss - heaps) * 10) / 10,
    native: nativeBreakdown(),
    main,
    workflowThreads: others,
  };
}
