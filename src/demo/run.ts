/**
 * Runs the demo batch through retryq and shows it to a person: live progress while intents wait out rate limits,
 * then a summary table with the provider's own counts (calls, 429s, side effects, duplicates).
 *
 * @example
 * ```ts
 * import { runDemo } from './run.js';
 * const summary = await runDemo({ rq, sim, runId: 'r1', out: (s) => process.stdout.write(s), tty: true });
 * summary.totals.duplicates; // 0
 * ```
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { RetryqClient } from '../client.js';
import { isFinal } from '../client.js';
import type { IntentStatus } from '../intent.js';
import { evidenceText } from '../policy/index.js';
import type { ProviderSim } from '../sim/index.js';
import type { WebhookMetrics } from '../webhooks/metrics.js';
import { DEMO_CREDENTIAL, defaultDemoSize, demoIntents } from './scenario.js';
import type { DemoSize } from './scenario.js';

export interface DemoRow {
  key: string;
  phase: string;
  attempts: number;
  inspections: number;
  outcome: string;
}

export interface DemoSummary {
  rows: DemoRow[];
  elapsedMs: number;
  totals: {
    intents: number;
    succeeded: number;
    failed: number;
    expired: number;
    cancelled: number;
    providerCalls: number;
    inspections: number;
    rateLimited: number;
    sideEffects: number;
    duplicates: number;
  };
  /** What the webhook receiver did during the demo, when it ran one. */
  webhooks?: DemoWebhookTotals | undefined;
}

/** The demo's webhook counts. */
export interface DemoWebhookTotals {
  /** Verified deliveries acknowledged (2xx), duplicates included. */
  deliveries: number;
  /** Redeliveries of a delivery id already stored: they changed nothing. */
  duplicatesIgnored: number;
  /** Deliveries for intents that had already ended (or were already settled by an earlier delivery). */
  late: number;
  /** Deliveries refused with 401 (forged or stale). */
  rejected: number;
  /** Forged or stale deliveries the receiver accepted (must be 0). */
  faultsAccepted: number;
  /** Intents whose outcome a webhook settled, without an inspection. */
  intentsResolved: number;
}

export interface DemoOptions {
  rq: RetryqClient;
  sim: ProviderSim;
  runId: string;
  size?: DemoSize;
  /** Writes text (no newline added). */
  out: (text: string) => void;
  /** Redraw progress in place (a terminal) or print a line every few seconds (a log). */
  tty: boolean;
  /** Stops following (the intents keep running in Temporal). */
  signal?: AbortSignal;
  /** Progress refresh interval. @default 1000 (ms) */
  refreshMs?: number;
  /** The webhook receiver's metrics, to count deliveries in the summary. */
  webhooks?: WebhookMetrics;
  /** The demo credential's load control as one line (budget, gate, block, in flight, waiting), when available. */
  loadControl?: () => Promise<string | undefined>;
}

const PHASES = ['scheduled', 'dispatching', 'waiting', 'inspecting', 'succeeded', 'failed', 'expired', 'cancelled'];

function outcomeOf(s: IntentStatus): string {
  if (s.phase === 'succeeded') {
    if (s.resolvedByWebhook) return 'resolved by webhook (no inspection)';
    const r = s.result as { status?: number; inspected?: boolean } | undefined;
    return r?.inspected ? 'found by inspection after a lost answer' : `HTTP ${r?.status ?? '?'}`;
  }
  if (s.phase === 'expired' && s.permittedAt) return `permits ${s.permittedAt.slice(11, 19)} UTC, past the deadline`;
  const e = s.lastEvidence;
  const ev = e ? evidenceText(e) : '';
  return s.finalReason?.startsWith('permanent') ? `${ev} (permanent)` : ev || (s.finalReason ?? '');
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/** The widest line the demo prints, so that it reads in an 100-column terminal and in a log. */
export const DEMO_LINE_WIDTH = 100;

/** `text` cut to `width` characters, ending in `…` when cut. */
function fit(text: string, width = DEMO_LINE_WIDTH): string {
  return text.length <= width ? text : `${text.slice(0, width - 1)}…`;
}

/** `text` broken between words into lines of at most `width` characters (a longer word gets a line of its own). */
export function wrapText(text: string, width = DEMO_LINE_WIDTH): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines.map((l) => fit(l, width));
}

/** What the progress counts mean, printed once before the progress. */
export const DEMO_LEGEND: readonly string[] = wrapText(
  'Each intent goes scheduled → dispatching → waiting (until the provider’s Retry-After or a backoff) → ' +
    'inspecting (looking up an answer that was lost), and ends succeeded, failed (a permanent error), expired ' +
    '(the provider’s permitted time lies past its deadline) or cancelled. 429s and duplicates are what the ' +
    'provider itself counted; a duplicate is a second side effect for one idempotency key, and stays 0.',
);

/** What one progress refresh shows. */
export interface DemoProgress {
  done: number;
  total: number;
  elapsedS: number;
  /** Intents per phase (phases with none may be left out). */
  counts: Readonly<Record<string, number>>;
  /** The earliest next attempt of a waiting intent, ISO. */
  nextWake: string | undefined;
  requestsPerSecond: number;
  limitPerSecond: number;
  rateLimited: number;
  duplicates: number;
  /** Load control of the demo credential, as one line. */
  control: string | undefined;
}

/**
 * The progress lines: several lines redrawn in place on a terminal, one line per refresh in a log; never wider than
 * {@link DEMO_LINE_WIDTH}. Phases with no intent are left out.
 */
export function progressLines(p: DemoProgress, tty: boolean): string[] {
  const phases = PHASES.filter((ph) => (p.counts[ph] ?? 0) > 0)
    .map((ph) => `${ph} ${p.counts[ph]}`)
    .join(' · ');
  const wake = p.nextWake ? `${p.nextWake.slice(11, 19)} UTC` : '—';
  const provider = `429s ${p.rateLimited} · duplicates ${p.duplicates}`;
  if (!tty) return [fit(`${p.done}/${p.total} done, ${p.elapsedS} s · ${phases} · ${provider}`)];
  const width = 30;
  const filled = Math.round((p.done / Math.max(1, p.total)) * width);
  return [
    `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${p.done}/${p.total} done  ${p.elapsedS} s`,
    phases,
    `next wake-up ${wake} · provider ${p.requestsPerSecond.toFixed(2)} req/s (limit ${p.limitPerSecond.toFixed(2)}/s) · ${provider}`,
    ...(p.control ? [`load control ${p.control}`] : []),
  ].map((l) => fit(l));
}

/** Submits the demo batch and follows it to the end. */
export async function runDemo(opts: DemoOptions): Promise<DemoSummary> {
  const size = opts.size ?? defaultDemoSize;
  const intents = demoIntents({ simUrl: opts.sim.url, runId: opts.runId, size });
  const started = Date.now();
  opts.out(`Demo: submitting ${intents.length} intents (provider limit ${size.rateLimitPerMinute}/min per key)…\n`);
  opts.out(DEMO_LEGEND.join('\n') + '\n');
  const keys = (await Promise.all(intents.map((i) => opts.rq.submit(i)))).map((s) => s.key);
  const latest = new Map<string, IntentStatus>();
  let drawnLines = 0;
  let lastLogAt = 0;

  for (;;) {
    if (opts.signal?.aborted) break;
    await Promise.all(
      keys
        .filter((k) => !isFinal(latest.get(k)?.phase ?? 'scheduled'))
        .map(async (k) => {
          const s = await opts.rq.status(k).catch(() => undefined);
          if (s) latest.set(k, s);
        }),
    );
    const statuses = keys.map((k) => latest.get(k));
    const counts = Object.fromEntries(PHASES.map((p) => [p, 0]));
    for (const s of statuses) counts[s?.phase ?? 'scheduled'] = (counts[s?.phase ?? 'scheduled'] ?? 0) + 1;
    const done = statuses.filter((s) => s && isFinal(s.phase)).length;
    const nextWake = statuses
      .map((s) => s?.nextAttemptAt)
      .filter((t): t is string => Boolean(t))
      .sort()[0];
    const m = opts.sim.metrics();
    const key = m.keys[DEMO_CREDENTIAL];
    const control = await opts.loadControl?.().catch(() => undefined);
    const lines = progressLines(
      {
        done,
        total: keys.length,
        elapsedS: Math.round((Date.now() - started) / 1000),
        counts,
        nextWake,
        requestsPerSecond: key?.requestsPerSecond ?? 0,
        limitPerSecond: (key?.rateLimitPerMinute ?? size.rateLimitPerMinute) / 60,
        rateLimited: m.totals.rateLimited,
        duplicates: m.totals.duplicates,
        control,
      },
      opts.tty,
    );
    if (opts.tty) {
      if (drawnLines) opts.out(`\x1b[${drawnLines}A\x1b[J`);
      opts.out(lines.join('\n') + '\n');
      drawnLines = lines.length;
    } else if (Date.now() - lastLogAt >= 5000 || done === keys.length) {
      opts.out(lines.join('\n') + '\n');
      lastLogAt = Date.now();
    }
    if (done === keys.length) break;
    // Ends early (without throwing) when the demo is stopped.
    await delay(opts.refreshMs ?? 1000, undefined, opts.signal ? { signal: opts.signal } : {}).catch(() => undefined);
  }

  // Let the simulator finish its webhook redeliveries (bounded), so the counts below are complete.
  for (let i = 0; opts.webhooks && i < 60 && opts.sim.metrics().webhooks.pending > 0 && !opts.signal?.aborted; i++)
    await delay(250, undefined, opts.signal ? { signal: opts.signal } : {}).catch(() => undefined);
  if (opts.webhooks) {
    // Statuses again: deliveries may have arrived after the last poll.
    await Promise.all(
      keys.map(async (k) => {
        const s = await opts.rq.status(k).catch(() => undefined);
        if (s) latest.set(k, s);
      }),
    );
  }
  const rows: DemoRow[] = keys.map((k) => {
    const s = latest.get(k);
    return {
      key: k,
      phase: s?.phase ?? 'unknown',
      attempts: s?.attempts ?? 0,
      inspections: s?.inspections ?? 0,
      outcome: s ? outcomeOf(s) : '',
    };
  });
  const m = opts.sim.metrics();
  const count = (p: string) => rows.filter((r) => r.phase === p).length;
  const summary: DemoSummary = {
    rows,
    elapsedMs: Date.now() - started,
    totals: {
      intents: rows.length,
      succeeded: count('succeeded'),
      failed: count('failed'),
      expired: count('expired'),
      cancelled: count('cancelled'),
      providerCalls: m.totals.requests,
      inspections: m.totals.inspections,
      rateLimited: m.totals.rateLimited,
      sideEffects: m.totals.sideEffects,
      duplicates: m.totals.duplicates,
    },
  };
  if (opts.webhooks) {
    const c = opts.webhooks.counts();
    const statuses = keys.map((k) => latest.get(k));
    const sum = (f: (s: IntentStatus) => number) => statuses.reduce((n, s) => n + (s ? f(s) : 0), 0);
    summary.webhooks = {
      deliveries: c.stored + c.orphan + c.duplicate + c.late + c.ignored,
      duplicatesIgnored: c.duplicate,
      late: c.late + sum((s) => s.webhooks?.late ?? 0),
      rejected: c.unauthorized,
      faultsAccepted: m.totals.webhookDeliveries.faultsAccepted,
      intentsResolved: statuses.filter((s) => s?.resolvedByWebhook).length,
    };
  }
  opts.out('\n' + formatSummary(summary) + '\n');
  return summary;
}

/** The summary for the terminal: no line wider than {@link DEMO_LINE_WIDTH}. */
export function formatSummary(s: DemoSummary): string {
  const keyWidth = Math.max(3, ...s.rows.map((r) => r.key.length)) + 2;
  const phaseWidth = Math.max(5, ...s.rows.map((r) => r.phase.length)) + 2;
  const ended = s.totals.succeeded + s.totals.failed + s.totals.expired + s.totals.cancelled;
  const lines = [
    ...wrapText(
      (ended < s.totals.intents
        ? `Demo stopped after ${Math.round(s.elapsedMs / 1000)} s with ${s.totals.intents - ended} intents still open ` +
          `(they go on when retryq dev runs again): `
        : `Demo finished in ${Math.round(s.elapsedMs / 1000)} s: `) +
        `${s.totals.intents} intents — ${s.totals.succeeded} succeeded, ` +
        `${s.totals.failed} failed, ${s.totals.expired} expired, ${s.totals.cancelled} cancelled.`,
    ),
    '',
    `${pad('KEY', keyWidth)}${pad('PHASE', phaseWidth)}${pad('ATTEMPTS', 10)}${pad('INSPECT', 9)}OUTCOME`,
    ...s.rows.map((r) =>
      fit(
        `${pad(r.key, keyWidth)}${pad(r.phase, 13)}${pad(String(r.attempts), 10)}${pad(String(r.inspections), 9)}${r.outcome}`,
      ),
    ),
    '',
    ...wrapText(
      `Provider saw ${s.totals.providerCalls} calls (${s.totals.inspections} inspections), ${s.totals.rateLimited} × 429, ` +
        `${s.totals.sideEffects} side effects, ${s.totals.duplicates} duplicate side effects.`,
    ),
  ];
  const w = s.webhooks;
  if (w)
    lines.push(
      ...wrapText(
        `Webhooks: ${w.deliveries} deliveries stored or acknowledged, ${w.duplicatesIgnored} duplicates ignored, ` +
          `${w.late} after the intent had ended, ${w.intentsResolved} intent${w.intentsResolved === 1 ? '' : 's'} ` +
          `resolved by webhook; ${w.rejected} forged or stale refused (${w.faultsAccepted} accepted): the simulator ` +
          'also sends copies with a forged signature or an old timestamp, and each must be refused with 401.',
      ),
    );
  return lines.join('\n');
}
