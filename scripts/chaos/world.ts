/**
 * The chaos suite's world: a real Temporal dev server persisting to a SQLite file (so it can be SIGKILLed and
 * started again from the same file, on the same port), the provider simulator in this process, retryq worker
 * processes that can be SIGKILLed, and a client. It also keeps the simulator's answer log, from which the checks
 * are made: duplicate side effects, early attempts, lost intents.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { RetryqClient, isFinal, workflowIdOf } from '../../src/client.js';
import { credentialSchema } from '../../src/config.js';
import type { CredentialConfig } from '../../src/config.js';
import type { IntentInput, IntentOutcome, IntentStatus } from '../../src/intent.js';
import { retryqSearchAttributes } from '../../src/search-attributes.js';
import { startProviderSim } from '../../src/sim/index.js';
import type { ProviderSim, ScenarioInput } from '../../src/sim/index.js';
import type { AnsweredRequest } from '../../src/sim/server.js';
import { resolveTemporalCli } from '../../src/temporal/binaries.js';
import { registerSearchAttributes } from '../../src/temporal/register-search-attributes.js';
import { freePort, startDevServer } from '../../src/temporal/server-process.js';
import type { ManagedServer } from '../../src/temporal/server-process.js';
import { killWorkerProcess, rolesFrom, startWorkerProcess } from '../support/worker-process.js';

/** The credential id the chaos workers serve; its secret is the simulator's default key. */
export const CHAOS_CREDENTIAL = 'chaos';
const SIM_KEY = 'sk_test_acme';

/** Worker-side config of the chaos credential. */
function chaosCredential(): CredentialConfig {
  return credentialSchema.parse({
    id: CHAOS_CREDENTIAL,
    secretEnv: 'CHAOS_KEY',
    requestsPerMinute: 6_000,
    // Every intent of a scenario in flight at once: a kill cuts off all of their calls.
    concurrency: 64,
    inspectConcurrency: 16,
  });
}

/** An answer the simulator sent, with the idempotency key it concerns (from the header, or the status URL). */
export interface LoggedAnswer extends AnsweredRequest {
  key: string | undefined;
  kind: 'dispatch' | 'inspect' | 'other';
}

/** What every scenario asserts, counted from the simulator's side and the intents' outcomes. */
export interface Checks {
  intents: number;
  /** Side effects beyond the first for one idempotency key, summed. */
  duplicateSideEffects: number;
  /** Provider calls for a key answered before the time an earlier answer's Retry-After permitted. */
  earlyAttempts: number;
  /** Intents that did not reach a final phase, or whose workflow is gone. */
  lostIntents: number;
  /** Succeeded intents whose operation the provider did not execute exactly once. */
  succeededWithoutOneSideEffect: number;
  /** Final phases, counted. */
  outcomes: Record<string, number>;
  /** Intents that used more attempts than allowed. */
  overBudget: number;
}

export class World {
  readonly answers: LoggedAnswer[] = [];
  private readonly workers = new Map<ChildProcess, string>();
  server: ManagedServer;
  client!: RetryqClient;
  temporal!: Client;
  private connection!: Connection;

  private constructor(
    readonly dir: string,
    readonly cliPath: string,
    readonly port: number,
    server: ManagedServer,
    readonly sim: ProviderSim,
    readonly prefix: string,
  ) {
    this.server = server;
  }

  static async start(): Promise<World> {
    const bin = await resolveTemporalCli();
    if (!bin.path) throw new Error('no Temporal CLI found: run `npx tsx src/cli.ts doctor` first');
    const dir = await mkdtemp(path.join(tmpdir(), 'retryq-chaos-'));
    const port = await freePort();
    const server = await startDevServer({ cliPath: bin.path, port, dbFile: path.join(dir, 'temporal.sqlite') });
    const answers: LoggedAnswer[] = [];
    const sim = await startProviderSim({
      onAnswer: (a) => {
        const inspected = /^\/v1\/operations\/([^/?]+)/.exec(a.path);
        const key = a.idempotencyKey ?? (inspected ? decodeURIComponent(inspected[1]!) : undefined);
        answers.push({ ...a, key, kind: inspected ? 'inspect' : a.method === 'GET' ? 'other' : 'dispatch' });
      },
    });
    const world = new World(dir, bin.path, port, server, sim, `chaos-${process.pid}`);
    (world as { answers: LoggedAnswer[] }).answers = answers;
    await world.connect();
    await registerSearchAttributes(world.connection, 'default', retryqSearchAttributes);
    return world;
  }

  get address(): string {
    return this.server.address;
  }

  private async connect(): Promise<void> {
    this.connection = await Connection.connect({ address: this.address });
    this.temporal = new Client({ connection: this.connection, namespace: 'default' });
    this.client = new RetryqClient({ client: this.temporal, taskQueuePrefix: this.prefix });
  }

  /**
   * Starts one retryq worker process; resolves once it polls. `roles`: a comma-separated subset of
   * `workflows,actions,inspect` (default all).
   */
  async startWorker(roles = 'workflows,actions,inspect'): Promise<ChildProcess> {
    const child = await startWorkerProcess(
      {
        address: this.address,
        namespace: 'default',
        taskQueuePrefix: this.prefix,
        credentials: [chaosCredential()],
        secrets: { [CHAOS_CREDENTIAL]: SIM_KEY },
        roles: rolesFrom(roles),
      },
      300_000,
    );
    this.workers.set(child, roles);
    child.once('exit', () => this.workers.delete(child));
    return child;
  }

  liveWorkers(): ChildProcess[] {
    return [...this.workers.keys()];
  }

  /** The live worker process that runs dispatches. */
  dispatcher(): ChildProcess {
    const found = [...this.workers].find(([, roles]) => roles.includes('actions'));
    if (!found) throw new Error('chaos: no worker process runs dispatches');
    return found[0];
  }

  /** Waits until every intent's status satisfies `predicate`. */
  async untilStatus(
    keys: readonly string[],
    predicate: (status: IntentStatus) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<void> {
    const until = Date.now() + timeoutMs;
    const pending = new Set(keys);
    while (pending.size > 0) {
      if (Date.now() > until) throw new Error(`chaos: ${what} did not happen within ${timeoutMs} ms`);
      for (const key of [...pending]) {
        const status = await this.client.status(key).catch(() => undefined);
        if (status && predicate(status)) pending.delete(key);
      }
      if (pending.size > 0) await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** SIGKILL: no drain, no goodbye to the server. */
  async killWorker(child: ChildProcess): Promise<void> {
    await killWorkerProcess(child);
  }

  /** SIGKILLs the Temporal server (its whole process group) and waits until it is gone. */
  async killServer(): Promise<void> {
    this.signalServer('SIGKILL');
    await this.server.exited;
  }

  /** Starts the server again from the same SQLite file on the same port; resolves once its namespace answers. */
  async restartServer(): Promise<void> {
    this.server = await startDevServer({
      cliPath: this.cliPath,
      port: this.port,
      dbFile: path.join(this.dir, 'temporal.sqlite'),
    });
  }

  signalServer(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.server.pid, signal);
    } catch {
      /* already gone */
    }
  }

  /** Replaces the simulator's scenario; every scenario keeps the default key. */
  setProvider(scenario: ScenarioInput): void {
    this.sim.setScenario(scenario);
  }

  /** Submits intents `<name>-0 … <name>-(n-1)`; returns their keys. */
  async submit(name: string, n: number, intent: Partial<IntentInput> = {}): Promise<string[]> {
    const keys = Array.from({ length: n }, (_, i) => `${name}-${i}`);
    for (const key of keys)
      await this.client.submit({
        idempotencyKey: key,
        credential: CHAOS_CREDENTIAL,
        action: { method: 'POST', url: `${this.sim.url}/v1/charges`, body: { amount: 100, order: key } },
        inspection: { url: `${this.sim.url}/v1/operations/{idempotencyKey}` },
        deadline: '15m',
        ...intent,
      });
    return keys;
  }

  /**
   * Waits until every intent is final (tolerating the server being away meanwhile), up to `timeoutMs`; returns
   * when the last one was seen final, and the outcomes of those that are.
   */
  async settle(
    keys: readonly string[],
    timeoutMs: number,
  ): Promise<{ doneAtMs: number; outcomes: Map<string, IntentOutcome>; finalAtMs: Map<string, number> }> {
    const outcomes = new Map<string, IntentOutcome>();
    const finalAtMs = new Map<string, number>();
    const until = Date.now() + timeoutMs;
    let doneAtMs = Date.now();
    while (outcomes.size < keys.length && Date.now() < until) {
      for (const key of keys) {
        if (outcomes.has(key)) continue;
        try {
          const desc = await this.temporal.workflow.getHandle(workflowIdOf(key)).describe();
          if (desc.status.name === 'RUNNING') continue;
          const outcome = await this.client.result(key);
          if (isFinal(outcome.phase)) {
            outcomes.set(key, outcome);
            doneAtMs = Date.now();
            finalAtMs.set(key, doneAtMs);
          }
        } catch {
          // The server is away or the workflow is not visible yet: look again.
        }
      }
      if (outcomes.size < keys.length) await new Promise((r) => setTimeout(r, 250));
    }
    return { doneAtMs, outcomes, finalAtMs };
  }

  /** Waits until `predicate` holds over the answer log; resolves with the time it first held. */
  async until(
    predicate: (answers: readonly LoggedAnswer[]) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<number> {
    const until = Date.now() + timeoutMs;
    while (!predicate(this.answers)) {
      if (Date.now() > until) throw new Error(`chaos: ${what} did not happen within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return Date.now();
  }

  /** The checks every scenario asserts, for `keys`. */
  check(keys: readonly string[], outcomes: ReadonlyMap<string, IntentOutcome>): Checks {
    let duplicateSideEffects = 0;
    let earlyAttempts = 0;
    let succeededWithoutOneSideEffect = 0;
    let overBudget = 0;
    const counted: Record<string, number> = {};
    for (const key of keys) {
      const effects = this.sim.sideEffects(key);
      duplicateSideEffects += Math.max(0, effects - 1);
      const outcome = outcomes.get(key);
      if (outcome) {
        counted[outcome.phase] = (counted[outcome.phase] ?? 0) + 1;
        if (outcome.phase === 'succeeded' && effects !== 1) succeededWithoutOneSideEffect++;
        if (outcome.attempts > outcome.maxAttempts) overBudget++;
      }
      // Invariant 2: after an answer with Retry-After, the key's next call is not answered before it permitted.
      const own = this.answers.filter((a) => a.key === key).sort((a, b) => a.atMs - b.atMs);
      let permittedAtMs = 0;
      for (const a of own) {
        // (The answer was sent before retryq read it, and a call is answered after it arrives: no tolerance needed.)
        if (a.atMs < permittedAtMs) earlyAttempts++;
        const seconds = a.retryAfter !== undefined ? Number(a.retryAfter) : Number.NaN;
        if (Number.isFinite(seconds)) permittedAtMs = Math.max(permittedAtMs, a.atMs + seconds * 1000);
      }
    }
    return {
      intents: keys.length,
      duplicateSideEffects,
      earlyAttempts,
      lostIntents: keys.filter((k) => !outcomes.has(k)).length,
      succeededWithoutOneSideEffect,
      outcomes: counted,
      overBudget,
    };
  }

  async close(): Promise<void> {
    for (const child of this.liveWorkers()) await this.killWorker(child);
    this.signalServer('SIGCONT');
    await this.server.stop(2000);
    await this.connection?.close().catch(() => undefined);
    await this.sim.close();
    await rm(this.dir, { recursive: true, force: true });
  }
}
