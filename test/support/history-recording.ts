/**
 * Records intent workflow histories for the replay test (test/workflow/intent-replay.test.ts): runs each scenario
 * below against a time-skipping server, the provider simulator and retryq's real workers, and writes each history
 * as JSON (`historyToJSON`) to `test/workflow/histories/<name>.json`. No vitest here: `npm run record-histories`
 * (scripts/record-histories.ts) calls it.
 *
 * Re-record only on purpose (a deliberate, versioned workflow change); the checked-in histories are what guards
 * every other change against non-determinism.
 */
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import * as prettier from 'prettier';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { RetryqClient, workflowIdOf } from '../../src/client.js';
import type { RetryqClientOptions } from '../../src/client.js';
import type { IntentInput, IntentStatus } from '../../src/intent.js';
import { createTimeSkippingEnvironment } from '../../src/testing.js';
import { createWorkers, intentWorkflowBundle } from '../../src/worker.js';
import { startProviderSim } from '../../src/sim/index.js';
import type { ProviderSim, ScenarioInput } from '../../src/sim/index.js';
import { CREDENTIAL, SIM_SECRET, testCredential } from './intent-credential.js';

/** One recorded scenario: the simulator's script, the intent's overrides, and what the operator does meanwhile. */
export interface HistoryScenario {
  name: string;
  /** What the history shows. */
  description: string;
  scenario: ScenarioInput;
  intent?: Partial<IntentInput>;
  /** Runs before submit (e.g. takes the provider down, or closes the credential's gate with another intent). */
  before?: (ctx: {
    sim: ProviderSim;
    newClient: () => RetryqClient;
    /** Waits until the intent `key` has a status `predicate` accepts. */
    waitForStatus: (key: string, predicate: (s: IntentStatus) => boolean) => Promise<IntentStatus>;
  }) => Promise<void>;
  /** Options of the recording's client besides its connection and queues. */
  client?: Pick<RetryqClientOptions, 'stalledDispatchAfterMs'>;
  /** Runs after submit; the default waits for the result. */
  drive?: (ctx: { client: RetryqClient; key: string; waitFor: WaitFor; sim: ProviderSim }) => Promise<void>;
}

type WaitFor = (predicate: (s: IntentStatus) => boolean) => Promise<IntentStatus>;

const firstWrite = (steps: NonNullable<ScenarioInput['rules']>[number]['steps']): ScenarioInput => ({
  rules: [{ match: { idempotencyKeyPrefix: 'replay-' }, steps, then: 'normal' }],
});

/**
 * The release whose histories these are. Each release records its own set (`<scenario>-v<version>`) and never
 * re-records an older one: every released history replays on the current code in CI (docs/development.md).
 */
export const RELEASE = '0.2.0';
const UNSERVED = 'unserved-cred';

/** The scenarios whose histories are checked in: every path of the intent workflow, once. */
export const historyScenarios: HistoryScenario[] = (
  [
    {
      name: 'rate-limited-then-succeeded',
      description: '429 with Retry-After 120 s, a durable wait, then 201',
      scenario: firstWrite([{ status: 429, retryAfter: 120 }]),
    },
    {
      name: 'unknown-outcome-inspected',
      description: 'the write committed but the connection reset; the inspection finds it succeeded',
      scenario: firstWrite([{ commitThen: 'reset' }]),
    },
    {
      name: 'unknown-outcome-absent-redispatched',
      description: 'the connection reset before executing; the inspection finds nothing; re-dispatch succeeds',
      scenario: firstWrite([{ reset: true }]),
    },
    {
      name: 'expired',
      description: '429 with Retry-After 2 h under a 1 h deadline: expired with the permitted time recorded',
      scenario: firstWrite([{ status: 429, retryAfter: 7200 }]),
      intent: { deadline: '1h' },
    },
    {
      name: 'cancelled',
      description: 'cancelled by signal while waiting on a Retry-After',
      scenario: firstWrite([{ status: 429, retryAfter: 120 }]),
      drive: async ({ client, key, waitFor }) => {
        await waitFor((s) => s.phase === 'waiting');
        await client.cancel(key, 'recorded cancellation');
      },
    },
    {
      name: 'retry-now',
      description: '503, a 10-minute backoff ended early by the retryNow signal, then 201',
      scenario: firstWrite([{ status: 503 }]),
      intent: { policy: { baseDelay: '10m', maxBackoff: '10m', jitter: 0 } },
      drive: async ({ client, key, waitFor }) => {
        await waitFor((s) => s.phase === 'waiting');
        await client.retryNow(key);
      },
    },
    {
      name: 'permanent-failure',
      description: '403 permission_denied: failed after one attempt',
      scenario: firstWrite([{ status: 403, code: 'permission_denied' }]),
    },
    {
      name: 'provider-unreachable-then-succeeded',
      description: 'the provider refuses the first connection (never sent, no attempt used), then answers 201',
      scenario: firstWrite(['normal']),
      intent: { policy: { maxAttempts: 1, baseDelay: '1m', maxBackoff: '1m', jitter: 0 } },
      before: async ({ sim }) => sim.stopListening(),
      drive: async ({ sim, waitFor }) => {
        await waitFor((s) => s.phase === 'waiting' && s.attemptLog.length >= 1);
        await sim.resumeListening();
      },
    },
    {
      // Real time: the time-skipping server does not skip while an activity waits to be started.
      name: 'stalled-then-cancelled',
      description: 'no worker serves the credential: reported stalled after the stall time (1 s), then cancelled',
      scenario: firstWrite(['normal']),
      intent: { credential: UNSERVED },
      client: { stalledDispatchAfterMs: 1000 },
      drive: async ({ client, key, waitFor }) => {
        await waitFor((s) => s.stalled !== undefined);
        await client.cancel(key, 'recorded cancellation of a stalled dispatch');
      },
    },
    {
      name: 'cancelled-before-dispatch',
      description: 'cancelled while no worker had started the dispatch: ends at once, no attempt, no reservation',
      scenario: firstWrite(['normal']),
      intent: { credential: UNSERVED },
      drive: async ({ client, key, waitFor }) => {
        await waitFor((s) => s.phase === 'dispatching');
        await client.cancel(key, 'recorded cancellation before dispatch');
      },
    },
    {
      name: 'cancelled-in-flight',
      description: 'cancelled while the provider held the answer: the request is aborted, a reservation is left',
      scenario: firstWrite([{ commitThen: 'timeout' }]),
      intent: { policy: { attemptTimeout: '10m' } },
      drive: async ({ client, key, sim, waitFor }) => {
        await waitFor((s) => s.phase === 'dispatching' && sim.sideEffects(key) > 0);
        await client.cancel(key, 'recorded cancellation in flight');
      },
    },
  ] satisfies HistoryScenario[]
).map((sc) => ({ ...sc, name: `${sc.name}-v${RELEASE}` }));

async function runScenario(env: TestWorkflowEnvironment, sc: HistoryScenario, sim: ProviderSim): Promise<string> {
  const prefix = `replay-${sc.name}`;
  const key = `replay-${sc.name}`;
  const workers = await createWorkers({
    config: {
      taskQueuePrefix: prefix,
      credentials: [testCredential()],
      temporal: {
        external: true,
        address: env.address,
        namespace: env.namespace ?? 'default',
        connect: { connectionOptions: { address: env.address } },
      },
    },
    connection: env.nativeConnection,
    secrets: new Map([[CREDENTIAL, SIM_SECRET]]),
    workflowBundle: await intentWorkflowBundle(),
  });
  const running = workers.run();
  try {
    const now = await env.currentTimeMs();
    const newClient = () =>
      new RetryqClient({
        client: env.client,
        taskQueuePrefix: prefix,
        clock: () => now,
        requireServedCredential: false,
        ...sc.client,
      });
    const client = newClient();
    const waitForStatus = async (of: string, predicate: (s: IntentStatus) => boolean) => {
      for (let i = 0; i < 200; i++) {
        const s = await client.status(of);
        if (predicate(s)) return s;
        // A recording script, not a vitest test: it polls the status the way an operator would.
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`${sc.name}: intent ${of} never reached the awaited status`);
    };
    const waitFor: WaitFor = (predicate) => waitForStatus(key, predicate);
    await sc.before?.({ sim, newClient, waitForStatus });
    await client.submit({
      idempotencyKey: key,
      credential: CREDENTIAL,
      action: { method: 'POST', url: `${sim.url}/v1/charges`, body: { amount: 1200, currency: 'eur', order: key } },
      inspection: { url: `${sim.url}/v1/operations/{idempotencyKey}` },
      deadline: '2h',
      ...sc.intent,
      policy: { jitter: 0, attemptTimeout: '5s', ...sc.intent?.policy },
    });
    await sc.drive?.({ client, key, waitFor, sim });
    const outcome = await client.result(key);
    const history = await env.client.workflow.getHandle(workflowIdOf(key)).fetchHistory();
    console.log(`${sc.name}: ${outcome.phase} after ${outcome.attempts} attempt(s), ${history.events?.length} events`);
    return historyToJSON(history);
  } finally {
    workers.shutdown();
    await running;
  }
}

/**
 * The client holds an intent at submit while its credential's gate is closed: the start carries a start delay until
 * its turn, `RetryPhase` `waiting` and the hold (the workflow option `heldAtSubmit`, the memo). Another intent,
 * answered 429, closes the gate first; the recorded one starts at its turn and dispatches.
 */
const GATE_CLOSER = 'replay-gate-closer';
historyScenarios.push({
  name: `held-at-submit-then-succeeded-v${RELEASE}`,
  description: "submitted while another intent's 429 (Retry-After 120 s) closed the gate: held by the server, then 201",
  scenario: {
    rules: [
      { match: { idempotencyKeyPrefix: GATE_CLOSER }, steps: [{ status: 429, retryAfter: 120 }], then: 'normal' },
    ],
  },
  // Its own client: the recording's client then reads the gate at its first submit (a client reads a credential's
  // gate before its first submit only; later reads refresh its view behind the submits).
  before: async ({ sim, newClient, waitForStatus }) => {
    await newClient().submit({
      idempotencyKey: GATE_CLOSER,
      credential: CREDENTIAL,
      action: { method: 'POST', url: `${sim.url}/v1/charges`, body: { amount: 1, currency: 'eur' } },
      inspection: { url: `${sim.url}/v1/operations/{idempotencyKey}` },
      deadline: '2h',
    });
    await waitForStatus(GATE_CLOSER, (s) => s.phase === 'waiting');
  },
  drive: async ({ client, key }) => {
    const status = await client.status(key);
    if (status.phase !== 'waiting' || status.held?.reason !== 'rate_limited')
      throw new Error(`held-at-submit: the intent was not held at submit (phase ${status.phase})`);
    await client.cancel(GATE_CLOSER, 'the recording needs no more of it');
  },
});

/**
 * Records every scenario's history into `outDir` (created if needed). With `onlyMissing`, scenarios whose file
 * exists are left alone: new scenarios are recorded without re-recording (and so changing) the old ones.
 */
export async function recordIntentHistories(
  outDir: string,
  options: { onlyMissing?: boolean } = {},
): Promise<string[]> {
  const env = await createTimeSkippingEnvironment();
  const written: string[] = [];
  try {
    for (const sc of historyScenarios) {
      const target = path.join(outDir, `${sc.name}.json`);
      if (options.onlyMissing && (await stat(target).catch(() => undefined))) continue;
      const sim = await startProviderSim({ scenario: sc.scenario });
      try {
        const json = await runScenario(env, sc, sim);
        await mkdir(outDir, { recursive: true });
        const file = path.join(outDir, `${sc.name}.json`);
        // Formatted as the project formats JSON, so `prettier --check` stays clean.
        const options = (await prettier.resolveConfig(file)) ?? {};
        await writeFile(file, await prettier.format(json, { ...options, parser: 'json' }));
        written.push(file);
      } finally {
        await sim.close();
      }
    }
  } finally {
    await env.teardown();
  }
  return written;
}
