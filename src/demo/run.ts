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
    if (s.resolvedByWebhook) return `resolved by webhook ${s.resolvedByWebhook.deliveryId} (no inspection)`;
    const r = s.result as { status?: number; inspected?: boolean } | undefined;
    return r?.inspected ? 'found by inspection after a lost answer' : `HTTP ${r?.status ?? '?'}`;
  }
  if (s.phase === 'expired' && s.permittedAt)
    return `server permits ${s.permittedAt.slice(11, 19)} UTC, past the deadline`;
  const e = s.lastEvidence;
  const ev = e ? evidenceText(e) : '';
  return s.finalReason?.startsWith('permanent') ? `${ev} (permanent)` : ev || (s.finalReason ?? '');
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

/** Submits the demo batch and follows it to the end. */
export async function runDemo(opts: DemoOptions): Promise<DemoSummary> {
  const size = opts.size ?? defaultDemoSize;
  const intents = demoIntents({ simUrl: opts.sim.url, runId: opts.runId, size });
  const started = Date.now();
  opts.out(`Demo: submitting ${intents.length} intents (provider limit ${size.rateLimitPerMinute}/min per key)…\n`);
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
    const width = 30;
    const filled = Math.round((done / keys.length) * width);
    const lines = [
      `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${keys.length} done  ${Math.round((Date.now() - started) / 1000)} s`,
      PHASES.map((p) => `${p} ${counts[p] ?? 0}`).join(' · '),
      `next wake-up ${nextWake ? `${nextWake.slice(11, 19)} UTC` : '—'} · provider ${(key?.requestsPerSecond ?? 0).toFixed(2)} req/s ` +
        `(limit ${((key?.rateLimitPerMinute ?? size.rateLimitPerMinute) / 60).toFixed(2)}/s) · 429s ${m.totals.rateLimited} · duplicates ${m.totals.duplicates}`,
      ...(control ? [`load control ${control}`] : []),
    ];
    if (opts.tty) {
      if (drawnLines) opts.out(`\x1b[${drawnLines}A\x1b[J`);
      opts.out(lines.join('\n') + '\n');
      drawnLines = lines.length;
    } else if (Date.now() - lastLogAt >= 5000 || done === keys.length) {
      opts.out(lines.join(' | ') + '\n');
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

/** The summary table for the terminal. */
export function formatSummary(s: DemoSummary): string {
  const keyWidth = Math.max(3, ...s.rows.map((r) => r.key.length)) + 2;
  const ended = s.totals.succeeded + s.totals.failed + s.totals.expired + s.totals.cancelled;
  const lines = [
    (ended < s.totals.intents
      ? `Demo stopped after ${Math.round(s.elapsedMs / 1000)} s with ${s.totals.intents - ended} intents still open ` +
        `(they go on when retryq dev runs again): `
      : `Demo finished in ${Math.round(s.elapsedMs / 1000)} s: `) +
      `${s.totals.intents} intents — ${s.totals.succeeded} succeeded, ` +
      `${s.totals.failed} failed, ${s.totals.expired} expired, ${s.totals.cancelled} cancelled.`,
    '',
    `${pad('KEY', keyWidth)}${pad('PHASE', 13)}${pad('ATTEMPTS', 10)}${pad('INSPECT', 9)}OUTCOME`,
    ...s.rows.map(
      (r) =>
        `${pad(r.key, keyWidth)}${pad(r.phase, 13)}${pad(String(r.attempts), 10)}${pad(String(r.inspections), 9)}${r.outcome}`,
    ),
    '',
    `Provider saw ${s.totals.providerCalls} calls (${s.totals.inspections} inspections), ${s.totals.rateLimited} × 429, ` +
      `${s.totals.sideEffects} side effects, ${s.totals.duplicates} duplicate side effects.`,
  ];
  const w = s.webhooks;
  if (w)
    lines.push(
      `Webhooks: ${w.deliveries} deliveries stored or acknowledged, ${w.duplicatesIgnored} duplicates ignored, ` +
        `${w.late} after the intent had ended, ${w.rejected} forged or stale refused (${w.faultsAccepted} accepted), ` +
        `${w.intentsResolved} intent${w.intentsResolved === 1 ? '' : 's'} resolved by webhook.`,
    );
  return lines.join('\n');
}
