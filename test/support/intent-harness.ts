/**
 * The one harness of the intent workflow tests (DESIGN.md "One workflow test harness").
 *
 * Per file: one Temporal environment (time-skipping by default, or the dev server) and the cached intent workflow
 * bundle. Per test: a provider simulator on port 0 (the stub provider, real HTTP), a random task-queue prefix, a
 * fresh set of retryq workers (`createWorkers`, the production topology) whose HTTP pool records every request the
 * activities send, and a `RetryqClient` whose clock is the environment's (skipped) time, fetched right before each
 * submit — time-skipping environments run far ahead of the wall clock.
 *
 * Time-skipping lock: the SDK's `result()` unlocks time skipping while it waits and locks it again after, on a
 * counter in the test server. Await one result at a time: concurrent `result()` calls drive the counter below zero,
 * and the server then skips time while workflow tasks run, which times them out. Likewise end every workflow a test
 * starts (the harness terminates leftovers): a timer firing later, with no worker, leaves a task outstanding and
 * the server never skips time again.
 *
 * @example
 * ```ts
 * const h = useIntentHarness();
 * it('succeeds', async () => {
 *   const t = await h.setup({ rules: [] });
 *   const outcome = await t.run(async () => {
 *     const { key } = await t.submit(t.intent());
 *     return t.client.result(key);
 *   });
 *   expect(outcome.phase).toBe('succeeded');
 * });
 * ```
 */
import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { RetryqClient, workflowIdOf } from '../../src/client.js';
import type { RetryqClientOptions, Submitted } from '../../src/client.js';
import type { RetryqConfig, WorkerTuning } from '../../src/config.js';
import type { IntentInput, IntentStatus } from '../../src/intent.js';
import { createDevServerEnvironment, createTimeSkippingEnvironment } from '../../src/testing.js';
import { createWorkers, intentWorkflowBundle } from '../../src/worker.js';
import type { RetryqWorkers } from '../../src/worker.js';
import { startProviderSim } from '../../src/sim/index.js';
import { CREDENTIAL, SIM_SECRET, testCredential } from './intent-credential.js';
import type { ProviderSim, ScenarioInput } from '../../src/sim/index.js';

export { CREDENTIAL, SIM_SECRET, testCredential } from './intent-credential.js';

/** One HTTP request an activity sent, as the worker's HTTP pool saw it. */
export interface SentRequest {
  method: string;
  /** origin + path */
  url: string;
  path: string;
  /** Lower-cased names (a repeated header keeps its last value). */
  headers: Record<string, string>;
  /** Header names as sent, in order, repeats included. */
  headerNames: string[];
  body: string | undefined;
  /** Which activity sent it and when Temporal scheduled that activity (server time = workflow time). */
  activity: { type: string; workflowId: string; scheduledAtMs: number } | undefined;
}

function headerRecord(headers: Dispatcher.DispatchOptions['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers) return out;
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) out[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
    return out;
  }
  const entries =
    typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function'
      ? [...(headers as Iterable<[string, string | string[] | undefined]>)]
      : Object.entries(headers as Record<string, string | string[] | undefined>);
  for (const [k, v] of entries) if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

function headerNames(headers: Dispatcher.DispatchOptions['headers']): string[] {
  if (!headers) return [];
  if (Array.isArray(headers)) return headers.filter((_, i) => i % 2 === 0).map(String);
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function')
    return [...(headers as Iterable<[string, unknown]>)].map(([k]) => k);
  return Object.keys(headers);
}

function currentActivity(): SentRequest['activity'] {
  try {
    const info = Context.current().info;
    return {
      type: info.activityType,
      workflowId: info.workflowExecution?.workflowId ?? '',
      scheduledAtMs: info.currentAttemptScheduledTimestampMs,
    };
  } catch {
    return undefined;
  }
}

/**
 * A keep-alive undici pool that records every request before sending it; `onRequest` sees each one first (the
 * harness uses it to keep the simulator's clock on Temporal's time).
 */
export function recordingAgent(onRequest: (r: SentRequest) => void = () => undefined): {
  agent: Agent;
  http: Dispatcher;
  sent: SentRequest[];
} {
  const agent = new Agent({ keepAliveTimeout: 1_000, connections: 16 });
  const sent: SentRequest[] = [];
  const http = agent.compose((dispatch) => (opts, handler) => {
    const origin = String(opts.origin ?? '');
    const request: SentRequest = {
      method: String(opts.method),
      url: `${origin}${opts.path}`,
      path: opts.path,
      headers: headerRecord(opts.headers),
      headerNames: headerNames(opts.headers),
      body: typeof opts.body === 'string' ? opts.body : undefined,
      activity: currentActivity(),
    };
    sent.push(request);
    onRequest(request);
    return dispatch(opts, handler);
  });
  return { agent, http, sent };
}

export type WorkerRoles = NonNullable<Parameters<typeof createWorkers>[0]['roles']>;

export type HarnessKind = 'time-skipping' | 'dev-server';

/** What one test gets: its simulator, workers, client and request log. */
export interface IntentTest {
  readonly env: TestWorkflowEnvironment;
  readonly sim: ProviderSim;
  readonly prefix: string;
  readonly client: RetryqClient;
  /** Requests the workers' activities sent, in order. */
  readonly sent: SentRequest[];
  /** Dispatches (writes) sent for `key`. */
  dispatches(key: string): SentRequest[];
  /** Inspections (status lookups) sent for `key`. */
  inspections(key: string): SentRequest[];
  /** A fresh random idempotency key. */
  newKey(label?: string): string;
  /** A valid POST intent against the simulator; `overrides` replace top-level fields (policy is merged). */
  intent(overrides?: Partial<IntentInput> & { idempotencyKey?: string }): IntentInput & { idempotencyKey: string };
  /** Submits with the client clock set to the environment's current time. */
  submit(input: IntentInput): Promise<Submitted>;
  /**
   * Runs a fresh set of workers while `fn` runs, then shuts them down (drained). `roles`: which roles they run
   * (default all). For a second worker polling the same queues use a process (test/support/worker-process.ts).
   */
  run<T>(fn: () => Promise<T>, options?: { roles?: WorkerRoles; worker?: Partial<WorkerTuning> }): Promise<T>;
  /**
   * Creates (not runs) retryq workers on this test's task queues; `worker` sizes the workflow worker; `bundle`
   * replaces the current workflow code (e.g. a released version's).
   */
  createWorkers(
    roles?: WorkerRoles,
    worker?: Partial<WorkerTuning>,
    bundle?: WorkflowBundleWithSourceMap,
  ): Promise<RetryqWorkers>;
  /** The workflow's failure, for asserting the failure chain and its `type`; fails if the workflow succeeded. */
  failureOf(key: string): Promise<ApplicationFailure>;
  /** Polls the status query (real time, bounded) until `predicate` holds; time does not skip meanwhile. */
  waitForStatus(key: string, predicate: (s: IntentStatus) => boolean, what: string): Promise<IntentStatus>;
  /** The environment's time, ms. */
  now(): Promise<number>;
}

export interface IntentHarness {
  readonly env: TestWorkflowEnvironment;
  readonly bundle: WorkflowBundleWithSourceMap;
  /** `client`: options of the test's `RetryqClient` beyond the harness's own (e.g. `{ holdAtSubmit: false }`). */
  setup(scenario?: ScenarioInput, options?: { client?: Partial<RetryqClientOptions> }): Promise<IntentTest>;
}

export interface HarnessOptions {
  /** Extra `temporal server start-dev` arguments (dev server only). */
  devServerArgs?: string[];
}

/** Registers the file's environment hooks; call once at the top of a test file. */
export function useIntentHarness(kind: HarnessKind = 'time-skipping', options: HarnessOptions = {}): IntentHarness {
  let env: TestWorkflowEnvironment | undefined;
  let bundle: WorkflowBundleWithSourceMap | undefined;
  const cleanups: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    [env, bundle] = await Promise.all([
      kind === 'time-skipping'
        ? createTimeSkippingEnvironment()
        : createDevServerEnvironment(options.devServerArgs ? { extraArgs: options.devServerArgs } : {}),
      intentWorkflowBundle(),
    ]);
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => {
    await env?.teardown();
  });

  const harness: IntentHarness = {
    get env() {
      if (!env) throw new Error('the environment is not started (beforeAll failed?)');
      return env;
    },
    get bundle() {
      if (!bundle) throw new Error('the workflow bundle is not built (beforeAll failed?)');
      return bundle;
    },
    async setup(
      scenario: ScenarioInput = {},
      setupOptions: { client?: Partial<RetryqClientOptions> } = {},
    ): Promise<IntentTest> {
      const e = harness.env;
      const workflowBundle = harness.bundle;
      // The simulator's clock follows Temporal's (skipped) time, as a real provider's clock follows real time: it
      // moves with real time and jumps to the scheduled time of every activity request. Its Date headers,
      // HTTP-dates and RFC 850 years are then read against a worker clock that agrees with them (plus any
      // `clockOffsetMs` a test sets on purpose).
      const clock = { atMs: await e.currentTimeMs(), perf: performance.now() };
      const simNow = () => Math.round(clock.atMs + (performance.now() - clock.perf));
      const sim = await startProviderSim({
        scenario,
        now: simNow,
        onError: (err) => console.error('provider-sim', err),
      });
      cleanups.push(() => sim.close());
      const { agent, http, sent } = recordingAgent((r) => {
        if (r.activity && r.activity.scheduledAtMs > simNow())
          Object.assign(clock, { atMs: r.activity.scheduledAtMs, perf: performance.now() });
      });
      cleanups.push(() => agent.destroy());
      const prefix = `t-${randomUUID().slice(0, 8)}`;
      let clockMs = Date.now();
      // A workflow left running would, once a later test skips time, get a workflow task that no worker polls, and
      // the test server does not skip time while a task is outstanding: end every intent this test started.
      const submitted = new Set<string>();
      cleanups.push(async () => {
        for (const key of submitted) {
          const handle = e.client.workflow.getHandle(workflowIdOf(key));
          const desc = await handle.describe().catch(() => undefined);
          if (desc?.status.name === 'RUNNING') await handle.terminate('the test that started it has finished');
        }
      });
      // Workers start inside `run()`, often just before the submit: the served-credential check has its own tests.
      const client = new RetryqClient({
        client: e.client,
        taskQueuePrefix: prefix,
        clock: () => clockMs,
        requireServedCredential: false,
        ...setupOptions.client,
      });
      const config: Pick<RetryqConfig, 'taskQueuePrefix' | 'credentials' | 'temporal'> = {
        taskQueuePrefix: prefix,
        credentials: [testCredential()],
        temporal: {
          external: true,
          address: 'test',
          namespace: e.namespace ?? 'default',
          connect: { connectionOptions: { address: 'test' } },
        },
      };
      // Each worker set gets its own connection (the core allows one worker per task queue and connection).
      const connections: NativeConnection[] = [];
      cleanups.push(async () => {
        for (const c of connections.splice(0)) await c.close();
      });
      const build = async (
        roles?: WorkerRoles,
        worker?: Partial<WorkerTuning>,
        bundle: WorkflowBundleWithSourceMap = workflowBundle,
      ) => {
        const connection = await NativeConnection.connect({ address: e.address });
        connections.push(connection);
        return createWorkers({
          config: worker ? { ...config, worker } : config,
          connection,
          secrets: new Map([[CREDENTIAL, SIM_SECRET]]),
          http,
          workflowBundle: bundle,
          ...(roles ? { roles } : {}),
        });
      };
      const isWrite = (r: SentRequest) => r.method !== 'GET';
      const t: IntentTest = {
        env: e,
        sim,
        prefix,
        client,
        sent,
        dispatches: (key) => sent.filter((r) => isWrite(r) && r.headers['idempotency-key'] === key),
        inspections: (key) =>
          sent.filter((r) => r.method === 'GET' && r.path === `/v1/operations/${encodeURIComponent(key)}`),
        newKey: (label = 'order') => `${label}-${randomUUID()}`,
        intent(overrides = {}) {
          const key = overrides.idempotencyKey ?? t.newKey();
          const { policy, ...rest } = overrides;
          return {
            idempotencyKey: key,
            credential: CREDENTIAL,
            action: {
              method: 'POST',
              url: `${sim.url}/v1/charges`,
              body: { amount: 1200, currency: 'eur', order: key },
            },
            inspection: { url: `${sim.url}/v1/operations/{idempotencyKey}` },
            deadline: '1h',
            ...rest,
            policy: { jitter: 0, attemptTimeout: '5s', ...policy },
          };
        },
        async submit(input) {
          clockMs = await e.currentTimeMs();
          if (typeof input.idempotencyKey === 'string') submitted.add(input.idempotencyKey);
          return client.submit(input);
        },
        createWorkers: build,
        async run(fn, options = {}) {
          const workers = await build(options.roles, options.worker);
          const running = workers.run();
          let stopped!: (err: unknown) => void;
          const workerFailed = new Promise<never>((_, reject) => {
            stopped = reject;
          });
          workerFailed.catch(() => undefined);
          running.then(
            () => stopped(new Error('the workers stopped while the test ran')),
            (err: unknown) => stopped(new Error(`a worker failed while the test ran: ${String(err)}`, { cause: err })),
          );
          try {
            return await Promise.race([fn(), workerFailed]);
          } finally {
            workers.shutdown();
            await running.catch(() => undefined);
          }
        },
        async waitForStatus(key, predicate, what) {
          let last: IntentStatus | undefined;
          for (let i = 0; i < 200; i++) {
            last = await client.status(key);
            if (predicate(last)) return last;
            await new Promise((r) => setTimeout(r, 50));
          }
          throw new Error(`status of ${key} never became ${what}; last: ${JSON.stringify(last)}`);
        },
        now: () => e.currentTimeMs(),
        async failureOf(key) {
          try {
            await e.client.workflow.getHandle(workflowIdOf(key)).result();
          } catch (err) {
            if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) return err.cause;
            throw err;
          }
          throw new Error(`intent ${key} succeeded; expected a failure`);
        },
      };
      return t;
    },
  };
  return harness;
}

/** Parses an ISO time that must be present. */
export function ms(iso: string | undefined): number {
  if (iso === undefined) throw new Error('expected a time, got undefined');
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) throw new Error(`not a time: ${iso}`);
  return t;
}

/**
 * Invariant 8 and the bounded attempt count: exactly `count` dispatches reached the HTTP pool for the intent, each
 * with its Idempotency-Key, method, URL and JSON body, and the credential added by the worker.
 */
export function expectStableDispatches(
  t: IntentTest,
  input: IntentInput & { idempotencyKey: string },
  count: number,
  /** The `Retryq-Attempt` of each request. @default 1, 2, … (a call that was never sent repeats its number) */
  attemptNumbers?: readonly number[],
): SentRequest[] {
  const sent = t.dispatches(input.idempotencyKey);
  expect(sent, `dispatches of ${input.idempotencyKey}`).toHaveLength(count);
  const body = input.action.body === undefined ? undefined : JSON.stringify(input.action.body);
  sent.forEach((r, i) => {
    expect(r.method).toBe(String(input.action.method).toUpperCase());
    expect(r.url).toBe(input.action.url);
    expect(r.headers['idempotency-key']).toBe(input.idempotencyKey);
    expect(r.headers['retryq-attempt']).toBe(String(attemptNumbers?.[i] ?? i + 1));
    expect(r.headers['authorization']).toBe(`Bearer ${SIM_SECRET}`);
    expect(r.body).toBe(body);
  });
  return sent;
}

/** When Temporal scheduled each dispatch of `key` (workflow time, ms). */
export function dispatchTimes(t: IntentTest, key: string): number[] {
  return t.dispatches(key).map((r) => {
    if (!r.activity) throw new Error('a dispatch was sent outside an activity');
    return r.activity.scheduledAtMs;
  });
}
