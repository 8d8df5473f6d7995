/**
 * The chaos scenarios. Each submits intents, injects one fault for real (signals to real processes, a provider
 * that really refuses connections), waits until every intent is final, and reports the checks of {@link World.check}
 * plus its recovery times in ms. Sizes come from {@link ChaosSize}: the short size runs in CI on two cores.
 */
import type { ScenarioInput, Step } from '../../src/sim/index.js';
import type { Checks, World } from './world.js';

export interface ChaosSize {
  /** Intents per scenario. */
  intents: number;
  /** How long the provider refuses connections, and how long the server stays stopped (SIGSTOP), in ms. */
  outageMs: number;
  /** How long each scenario may take to settle, in ms. */
  settleMs: number;
}

export const sizes = {
  short: { intents: 4, outageMs: 12_000, settleMs: 180_000 },
  full: { intents: 24, outageMs: 60_000, settleMs: 420_000 },
} as const satisfies Record<string, ChaosSize>;

export interface ScenarioReport {
  scenario: string;
  fault: string;
  checks: Checks;
  /** Recovery times (ms) and other figures, named by what they measure. */
  figures: Record<string, number | null>;
  /** Every check at zero, every intent final and as expected. */
  ok: boolean;
}

interface Scenario {
  name: string;
  fault: string;
  /** The final phase every intent must reach. */
  expect: 'succeeded';
  run(
    world: World,
    size: ChaosSize,
  ): Promise<{ keys: string[]; outcomes: Parameters<World['check']>[1]; figures: Record<string, number | null> }>;
}

const median = (values: number[]): number | null => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? null : sorted[Math.floor(sorted.length / 2)]!;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The first write of every key with this prefix gets `steps`, later ones are handled normally. */
const firstWrites = (prefix: string, steps: Step[], extra: Partial<ScenarioInput> = {}): ScenarioInput => ({
  ...extra,
  rules: [{ match: { idempotencyKeyPrefix: prefix }, steps, then: 'normal' }],
});

const answered = (world: World, keys: readonly string[], kind: 'dispatch' | 'inspect', status?: number) =>
  world.answers.filter(
    (a) =>
      a.kind === kind && a.key !== undefined && keys.includes(a.key) && (status === undefined || a.status === status),
  ).length;

const firstAnswerAfter = (world: World, keys: readonly string[], kind: 'dispatch' | 'inspect', afterMs: number) =>
  world.answers.find((a) => a.kind === kind && a.key !== undefined && keys.includes(a.key) && a.atMs >= afterMs)?.atMs;

export const scenarios: Scenario[] = [
  {
    name: 'server-sigkill-restart',
    fault:
      'Temporal server SIGKILLed while every intent sleeps on the Retry-After of a 503, restarted from its SQLite file 2 s later',
    expect: 'succeeded',
    async run(world, size) {
      const prefix = `server-kill-${Date.now()}`;
      world.setProvider(firstWrites(prefix, [{ status: 503, retryAfter: 4 }]));
      const keys = await world.submit(prefix, size.intents);
      await world.until(() => answered(world, keys, 'dispatch', 503) >= keys.length, 60_000, 'the first 503s');
      const killedAt = Date.now();
      await world.killServer();
      await sleep(2_000);
      await world.restartServer();
      const restartedAt = Date.now();
      const { doneAtMs, outcomes } = await world.settle(keys, size.settleMs);
      return {
        keys,
        outcomes,
        figures: {
          serverDownMs: restartedAt - killedAt,
          restartToFirstProviderCallMs:
            (firstAnswerAfter(world, keys, 'dispatch', restartedAt) ?? Number.NaN) - restartedAt,
          restartToAllFinalMs: doneAtMs - restartedAt,
        },
      };
    },
  },
  {
    name: 'worker-sigkill-mid-dispatch',
    fault:
      'the worker process running every dispatch SIGKILLed while the provider holds the requests (it answers after 8 s); ' +
      'another worker process serves workflows and inspections',
    expect: 'succeeded',
    async run(world, size) {
      const prefix = `worker-kill-${Date.now()}`;
      world.setProvider(firstWrites(prefix, [{ delayMs: 8_000 }]));
      const dispatcher = world.dispatcher();
      const keys = await world.submit(prefix, size.intents);
      await world.untilStatus(keys, (s) => s.phase === 'dispatching', 60_000, 'every intent dispatching');
      // The requests reach the provider a moment after the phase says so.
      await sleep(1_000);
      const killedAt = Date.now();
      await world.killWorker(dispatcher);
      const replacement = world.startWorker();
      const firstInspectionAt = await world.until(
        () => answered(world, keys, 'inspect') > 0,
        size.settleMs,
        'the first inspection after the kill',
      );
      const { doneAtMs, outcomes, finalAtMs } = await world.settle(keys, size.settleMs);
      await replacement;
      return {
        keys,
        outcomes,
        figures: {
          killToFirstInspectionMs: firstInspectionAt - killedAt,
          killToFinalMedianMs: median([...finalAtMs.values()].map((at) => at - killedAt)),
          killToAllFinalMs: doneAtMs - killedAt,
          inspections: answered(world, keys, 'inspect'),
        },
      };
    },
  },
  {
    name: 'provider-refusing-connections',
    fault:
      'the provider refuses every connection (nothing is sent) until each intent has been refused three times, ' +
      'more than its maxAttempts of 2 (under 0.1.0 each refusal used an attempt and the intents failed)',
    expect: 'succeeded',
    async run(world, size) {
      const prefix = `refusing-${Date.now()}`;
      world.setProvider(firstWrites(prefix, ['normal']));
      await world.sim.stopListening();
      const downAt = Date.now();
      const keys = await world.submit(prefix, size.intents, {
        policy: { maxAttempts: 2, baseDelay: '1s', maxBackoff: '4s' },
      });
      // Down for at least the given time, and until every intent met three refusals (or ended).
      await sleep(size.outageMs);
      await world.untilStatus(
        keys,
        (s) => s.attemptLog.length >= 3 || ['succeeded', 'failed', 'expired', 'cancelled'].includes(s.phase),
        size.settleMs,
        'three refusals for every intent',
      );
      await world.sim.resumeListening();
      const backAt = Date.now();
      const { doneAtMs, outcomes } = await world.settle(keys, size.settleMs);
      return {
        keys,
        outcomes,
        figures: { outageMs: backAt - downAt, providerBackToAllFinalMs: doneAtMs - backAt },
      };
    },
  },
  {
    name: 'answer-after-attempt-timeout',
    fault: 'the provider executes each first write but answers after 6 s, past the 2 s attempt timeout',
    expect: 'succeeded',
    async run(world, size) {
      const prefix = `late-${Date.now()}`;
      world.setProvider(firstWrites(prefix, [{ delayMs: 6_000 }]));
      const startedAt = Date.now();
      const keys = await world.submit(prefix, size.intents, { policy: { attemptTimeout: '2s', baseDelay: '1s' } });
      const { doneAtMs, outcomes } = await world.settle(keys, size.settleMs);
      return {
        keys,
        outcomes,
        figures: { submitToAllFinalMs: doneAtMs - startedAt, inspections: answered(world, keys, 'inspect') },
      };
    },
  },
  {
    name: 'server-sigstop-hung',
    fault: 'the Temporal server hangs (SIGSTOP) while intents sleep and dispatch, then continues (SIGCONT)',
    expect: 'succeeded',
    async run(world, size) {
      const prefix = `hung-${Date.now()}`;
      world.setProvider(firstWrites(prefix, [{ status: 503, retryAfter: 2 }]));
      const keys = await world.submit(prefix, size.intents);
      await world.until(() => answered(world, keys, 'dispatch', 503) >= 1, 60_000, 'the first 503');
      const stoppedAt = Date.now();
      world.signalServer('SIGSTOP');
      await sleep(Math.min(size.outageMs, 30_000));
      world.signalServer('SIGCONT');
      const continuedAt = Date.now();
      const { doneAtMs, outcomes } = await world.settle(keys, size.settleMs);
      return {
        keys,
        outcomes,
        figures: { hungMs: continuedAt - stoppedAt, continueToAllFinalMs: doneAtMs - continuedAt },
      };
    },
  },
  {
    name: 'provider-ignores-idempotency-keys',
    fault:
      'a careless provider executes every request it gets (no idempotency), and loses the answer of each first write ' +
      '(connection reset after executing)',
    expect: 'succeeded',
    async run(world, size) {
      const prefix = `careless-${Date.now()}`;
      world.setProvider(firstWrites(prefix, [{ commitThen: 'reset' }], { honorIdempotencyKeys: false }));
      const startedAt = Date.now();
      const keys = await world.submit(prefix, size.intents);
      const { doneAtMs, outcomes } = await world.settle(keys, size.settleMs);
      world.setProvider({});
      return {
        keys,
        outcomes,
        figures: { submitToAllFinalMs: doneAtMs - startedAt, inspections: answered(world, keys, 'inspect') },
      };
    },
  },
];

/** Runs the scenarios named in `only` (all by default) in one world, one after the other. */
export async function runScenarios(world: World, size: ChaosSize, only?: readonly string[]): Promise<ScenarioReport[]> {
  const reports: ScenarioReport[] = [];
  for (const sc of scenarios) {
    if (only && !only.includes(sc.name)) continue;
    const { keys, outcomes, figures } = await sc.run(world, size);
    const checks = world.check(keys, outcomes);
    const ok =
      checks.duplicateSideEffects === 0 &&
      checks.earlyAttempts === 0 &&
      checks.lostIntents === 0 &&
      checks.succeededWithoutOneSideEffect === 0 &&
      checks.overBudget === 0 &&
      (checks.outcomes[sc.expect] ?? 0) === keys.length;
    reports.push({ scenario: sc.name, fault: sc.fault, checks, figures, ok });
  }
  return reports;
}
