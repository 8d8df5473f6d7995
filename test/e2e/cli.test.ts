/**
 * The `retryq` commands against a real Temporal dev server, real workers and the simulated provider: JSON output
 * for scripts, clear errors and exit codes.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RetryqClient } from '../../src/client.js';
import { credentialSchema } from '../../src/config.js';
import { credentialsReport } from '../../src/load-control/credentials-report.js';
import { createDevServerEnvironment } from '../../src/testing.js';
import { createWorkers } from '../../src/worker.js';
import type { RetryqWorkers } from '../../src/worker.js';
import { startProviderSim } from '../../src/sim/index.js';
import type { ProviderSim } from '../../src/sim/index.js';

const execFileAsync = promisify(execFile);
const root = new URL('../../', import.meta.url).pathname;
const prefix = `cli-${randomUUID().slice(0, 8)}`;
const credential = 'acme-cli';
// Every command is a fresh Node process that compiles the CLI with tsx: seconds each on a busy machine, and a test
// runs up to five of them.
vi.setConfig({ testTimeout: 180_000 });
/** How the tests poll an intent's status: every 100 ms, for up to 20 s. */
const poll = { timeout: 20_000, interval: 100 };

let env: TestWorkflowEnvironment;
let sim: ProviderSim;
let workers: RetryqWorkers;
let running: Promise<void>;

beforeAll(async () => {
  env = await createDevServerEnvironment();
  sim = await startProviderSim({
    scenario: {
      keys: [
        { key: 'sk_test_cli', id: credential },
        // One credential per test that meets a 429: a rate limit closes its credential's gate for everyone.
        { key: 'sk_test_cli_wait', id: `${credential}-wait` },
        { key: 'sk_test_cli_term', id: `${credential}-term` },
      ],
      rules: [
        {
          match: { idempotencyKey: 'hold-*' },
          steps: [{ status: 429, code: 'rate_limit_exceeded', retryAfter: '3600' }],
        },
      ],
    },
  });
  workers = await createWorkers({
    config: {
      taskQueuePrefix: prefix,
      temporal: { namespace: 'default' } as never,
      credentials: ['', '-wait', '-term'].map((suffix) => ({
        id: `${credential}${suffix}`,
        secretEnv: 'UNUSED',
        requestsPerMinute: 600,
        concurrency: 4,
        inspectReserve: 0.2,
        inspectConcurrency: 2,
        authHeader: 'authorization',
        authScheme: 'Bearer',
        learn: 'down',
      })),
    },
    connection: env.nativeConnection,
    secrets: new Map([
      [credential, 'sk_test_cli'],
      [`${credential}-wait`, 'sk_test_cli_wait'],
      [`${credential}-term`, 'sk_test_cli_term'],
    ]),
  });
  running = workers.run();
});

afterAll(async () => {
  workers?.shutdown();
  await running;
  await sim?.close();
  await env?.teardown();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function retryq(args: string[], extraEnv: Record<string, string> = {}): Promise<Run> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
      cwd: root,
      env: { ...process.env, TEMPORAL_ADDRESS: env.address, RETRYQ_TASK_QUEUE_PREFIX: prefix, ...extraEnv },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

function submitArgs(key: string, amount = 100, as = credential): string[] {
  return [
    'submit',
    '--key',
    key,
    '--credential',
    as,
    '--method',
    'POST',
    '--url',
    `${sim.url}/v1/charges`,
    '--body',
    JSON.stringify({ amount }),
    '--inspect-url',
    `${sim.url}/v1/operations/{idempotencyKey}`,
  ];
}

describe('the workers behind the commands', () => {
  it("get retryq's workflow bundles as files, so no copy of their code stays in the worker's main thread", () => {
    const bundles = workers.workers
      .filter((w) => /\.(workflows|credentials)$/.test(w.options.taskQueue))
      .map((w) => w.options.workflowBundle);
    expect(bundles).toHaveLength(2);
    for (const b of bundles) {
      expect(b !== undefined && 'codePath' in b ? b.codePath : undefined).toMatch(/\.js$/);
      expect(b).not.toHaveProperty('code');
    }
  });
});

describe('retryq submit', () => {
  it('submits, waits and prints the outcome as JSON with --wait --json', async () => {
    const key = `ok-${randomUUID()}`;
    const r = await retryq([...submitArgs(key), '--wait', '--json']);
    expect(r.code).toBe(0);
    const outcome = JSON.parse(r.stdout) as { phase: string; attempts: number; idempotencyKey: string };
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, idempotencyKey: key });
    expect(sim.sideEffects(key)).toBe(1);
  });

  it('attaches on a repeat with the same payload and exits 4 on a different payload', async () => {
    const key = `hold-${randomUUID()}`;
    const first = await retryq([...submitArgs(key), '--json']);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ key, attached: false });
    const again = await retryq([...submitArgs(key), '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ key, attached: true });
    const conflict = await retryq(submitArgs(key, 999));
    expect(conflict.code).toBe(4);
    expect(conflict.stderr).toContain(`Idempotency key "${key}" is already used by an intent with a different payload`);
  });

  it('rejects an invalid intent with exit 2, naming every bad field, and starts nothing', async () => {
    const key = `bad-${randomUUID()}`;
    const r = await retryq([
      'submit',
      '--key',
      key,
      '--credential',
      credential,
      '--method',
      'POST',
      '--url',
      'ftp://example.com/x',
      '--header',
      'Authorization: Bearer sk_live_leak',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('action.url: must use http or https');
    expect(r.stderr).toContain('action.headers.Authorization: must not be set');
    expect(r.stderr).toContain('inspection: is required for POST');
    expect(r.stderr).not.toContain('sk_live_leak');
    const status = await retryq(['status', key]);
    expect(status.code).toBe(3);
  });
});

describe('retryq status, list and cancel', () => {
  it('shows a waiting intent, lists it by phase, and cancels it', async () => {
    const key = `hold-${randomUUID()}`;
    expect((await retryq(submitArgs(key, 100, `${credential}-wait`))).code).toBe(0);

    // Wait through the client (a command per poll costs seconds on a busy machine), then ask the command once.
    const rq = new RetryqClient({ client: env.client, taskQueuePrefix: prefix });
    await expect.poll(async () => (await rq.status(key)).phase, poll).toBe('waiting');
    const json = await retryq(['status', key, '--json']);
    expect(json.code).toBe(0);
    const status = JSON.parse(json.stdout) as { phase: string; permittedAt?: string };
    expect(status.phase).toBe('waiting');
    expect(status.permittedAt).toMatch(/^\d{4}-/);

    const human = await retryq(['status', key]);
    expect(human.stdout).toMatch(/phase +waiting/);
    expect(human.stdout).toMatch(/last +HTTP 429 rate_limit_exceeded → rate_limited \(Retry-After 3600\)/);

    // Visibility is eventually consistent: wait until the list has it, then list with the command.
    const filter = { phase: 'waiting', credential: `${credential}-wait` };
    await expect.poll(async () => (await rq.list(filter)).some((e) => e.key === key), poll).toBe(true);
    const list = await retryq(['list', '--phase', 'waiting', '--credential', `${credential}-wait`, '--json']);
    expect(list.code).toBe(0);
    const listed = JSON.parse(list.stdout) as { key: string; phase: string }[];
    expect(listed.find((r) => r.key === key)).toMatchObject({ phase: 'waiting' });

    const cancel = await retryq(['cancel', key, '--reason', 'customer withdrew', '--json']);
    expect(cancel.code).toBe(0);
    const handle = env.client.workflow.getHandle(`intent:${key}`);
    const failure = await handle.result().then(
      () => undefined,
      (err: unknown) => err as { cause?: { message?: string } },
    );
    expect(failure?.cause?.message).toMatch(
      /^Cancelled: POST \S+\/v1\/charges will not be sent again \(customer withdrew\)\./,
    );
    expect(JSON.parse(cancel.stdout)).toMatchObject({
      key,
      cancelRequested: true,
      phase: 'cancelled',
      reservation: null,
    });
    const after = JSON.parse((await retryq(['status', key, '--json'])).stdout) as { phase: string; attempts: number };
    expect(after).toMatchObject({ phase: 'cancelled', attempts: 1 });
  });

  it('reports an intent terminated in Temporal as failed, with its last recorded attempts', async () => {
    const key = `hold-${randomUUID()}`;
    expect((await retryq(submitArgs(key, 100, `${credential}-term`))).code).toBe(0);
    const handle = env.client.workflow.getHandle(`intent:${key}`);
    const rq = new RetryqClient({ client: env.client, taskQueuePrefix: prefix });
    await expect.poll(async () => (await rq.status(key)).phase, poll).toBe('waiting');
    await handle.terminate('operator cleanup');
    const r = await retryq(['status', key, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      phase: 'failed',
      attempts: 1,
      finalReason: 'the workflow was terminated in Temporal',
    });
  });

  it('exits 3 for an unknown key and 2 for a missing argument', async () => {
    expect((await retryq(['status', `nope-${randomUUID()}`])).code).toBe(3);
    const missing = await retryq(['cancel']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cancel needs an idempotency key');
  });
});

describe('what the commands say', () => {
  it('retry-now says when the next attempt really runs and why, and exits 5 once the intent ended', async () => {
    const key = `hold-${randomUUID()}`;
    expect((await retryq(submitArgs(key, 100, `${credential}-wait`))).code).toBe(0);
    const rq = new RetryqClient({ client: env.client, taskQueuePrefix: prefix });
    await expect.poll(async () => (await rq.status(key)).phase, poll).toBe('waiting');
    // The intent waits for its own Retry-After, or for the credential's gate an earlier 429 closed: either way the
    // report names the real time and the reason.
    const json = JSON.parse((await retryq(['retry-now', key, '--json'])).stdout) as {
      why: string;
      nextAttemptAt: string;
      message: string;
    };
    expect(['server_floor', 'gate']).toContain(json.why);
    expect(json.message).toContain(json.nextAttemptAt);
    const report = await retryq(['retry-now', key]);
    expect(report.code).toBe(0);
    expect(report.stdout).toMatch(
      new RegExp(`^${key}: .*(no sooner than|runs at) ${json.nextAttemptAt.replace(/\./g, '\\.')}`),
    );
    expect((await retryq(['cancel', key])).stdout).toContain(`Intent ${key} is cancelled`);
    const ended = await retryq(['retry-now', key]);
    expect(ended.code).toBe(5);
    expect(ended.stderr).toContain(`Intent "${key}" has already ended (cancelled)`);
    // With --json, nothing to do is still one JSON document on stdout (and exit 5).
    const cancelAgain = await retryq(['cancel', key, '--json']);
    expect(cancelAgain.code).toBe(5);
    expect(JSON.parse(cancelAgain.stdout)).toEqual({
      key,
      cancelRequested: false,
      alreadyEnded: true,
      phase: 'cancelled',
      reservation: null,
    });
    const retryAgain = await retryq(['retry-now', key, '--json']);
    expect(retryAgain.code).toBe(5);
    expect(JSON.parse(retryAgain.stdout)).toMatchObject({ key, alreadyEnded: true, phase: 'cancelled' });
    expect((await retryq(['retry-now', `nope-${randomUUID()}`])).code).toBe(3);
  }, 120_000);

  it('submit exits 6 for a credential no worker serves, and --no-worker-check queues it; cancel ends it at once', async () => {
    const key = `ok-${randomUUID()}`;
    const refused = await retryq(submitArgs(key, 100, 'nope-cred'));
    expect(refused.code).toBe(6);
    expect(refused.stderr).toContain(
      `No live worker serves credential "nope-cred" (nobody polls task queue ${prefix}.actions.nope-cred)`,
    );
    expect((await retryq(['status', key])).code).toBe(3);
    expect((await retryq([...submitArgs(key, 100, 'nope-cred'), '--no-worker-check'])).code).toBe(0);
    const cancel = await retryq(['cancel', key, '--reason', 'wrong credential']);
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toBe(
      `Intent ${key} is cancelled: wrong credential (before it was sent). Nothing is left to reconcile.\n`,
    );
  }, 120_000);

  it("words bad flags in retryq's terms and passes Temporal's refusals on without a stack trace", async () => {
    const bad = await retryq([...submitArgs(`ok-${randomUUID()}`), '--max-attempts', 'lots']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--max-attempts must be a positive integer (got "lots")');
    const refused = await retryq(['status', 'any-key'], { TEMPORAL_NAMESPACE: `nope-${randomUUID().slice(0, 8)}` });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^retryq: Temporal refused to read the status of intent "any-key" \(NOT_FOUND\): .*amespace/,
    );
    expect(refused.stderr).not.toMatch(/^\s+at /m);
  }, 120_000);
});

describe('retryq credentials', () => {
  const configured = JSON.stringify([{ id: credential, secretEnv: 'UNUSED' }]);

  it('shows the budget split, the gate closed by a 429 with its time and reason, and the intents it holds', async () => {
    const key = `hold-${randomUUID()}`;
    expect((await retryq(submitArgs(key))).code).toBe(0);
    type Row = {
      credential: string;
      budget: { totalPerMinute: number; dispatchPerMinute: number; inspectPerMinute: number };
      gate: { state: string; closedUntil: string | null; reason: string | null };
      blocked: unknown;
      inFlight: number;
      waiting: number;
    };
    // Wait through the library the command uses (a command per poll costs seconds on a busy machine).
    const credentials = [credentialSchema.parse({ id: credential, secretEnv: 'UNUSED' })];
    await expect
      .poll(async () => {
        const [row] = await credentialsReport({ client: env.client, prefix, credentials });
        return row?.gate.state === 'closed' && (row.waiting ?? 0) > 0;
      }, poll)
      .toBe(true);
    const r = await retryq(['credentials', '--json'], { RETRYQ_CREDENTIALS: configured });
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as Row[];
    const row = rows.find((x) => x.credential === credential);
    expect(row).toMatchObject({
      credential,
      budget: { totalPerMinute: 600, dispatchPerMinute: 480, inspectPerMinute: 120 },
      gate: { state: 'closed', reason: 'HTTP 429 rate_limit_exceeded (Retry-After: 3600)' },
      blocked: null,
    });
    expect(Date.parse(row?.gate.closedUntil ?? '')).toBeGreaterThan(Date.now() + 3_000_000);
    expect(row?.waiting).toBeGreaterThanOrEqual(1);

    const human = await retryq(['credentials'], { RETRYQ_CREDENTIALS: configured });
    expect(human.stdout).toMatch(/gate +rate limited until \d{2}:\d{2}:\d{2} UTC \(HTTP 429 rate_limit_exceeded/);
    expect(human.stdout).toContain(
      'budget     600/min: dispatch 480/min while inspections run, inspections 120/min reserved',
    );
  });

  it('lists what the running workers serve, also when this process is configured with no credential', async () => {
    // The workers called with this credential in the test above, so its load control is active.
    const r = await retryq(['credentials', '--json'], { RETRYQ_CREDENTIALS: '' });
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as {
      credential: string;
      configured: boolean;
      served: boolean;
      pollers: number;
    }[];
    expect(rows.find((row) => row.credential === credential)).toMatchObject({ configured: false, served: true });
    expect(rows.find((row) => row.credential === credential)?.pollers).toBeGreaterThanOrEqual(1);
    const human = await retryq(['credentials'], { RETRYQ_CREDENTIALS: '' });
    expect(human.stdout).toMatch(
      new RegExp(
        `^${credential}\\n  workers    served by \\d+ live workers? \\(not configured in this process\\)`,
        'm',
      ),
    );
    expect(human.stdout).not.toContain('No credentials');
  });

  it('resumes a credential that is not blocked, and exits 3 for one that never made a call', async () => {
    const ok = await retryq(['credentials', 'resume', credential, '--json'], { RETRYQ_CREDENTIALS: configured });
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ credential, wasBlocked: null });
    const unknown = await retryq(['credentials', 'resume', 'never-used'], { RETRYQ_CREDENTIALS: configured });
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toContain('Credential "never-used" has no load-control state yet');
    const usage = await retryq(['credentials', 'pause', credential]);
    expect(usage.code).toBe(2);
  });
});

describe('retryq with bad configuration or no server', () => {
  it('exits 78 and lists every configuration problem', async () => {
    const r = await retryq(['list'], { RETRYQ_CREDENTIALS: '[{"id":"Bad Id"}]', RETRYQ_DEV_PORT: 'x' });
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('RETRYQ_CREDENTIALS[0].id');
    expect(r.stderr).toContain('RETRYQ_CREDENTIALS[0].secretEnv');
    expect(r.stderr).toContain('RETRYQ_DEV_PORT');
  });

  it('exits 1 with where it tried to connect when Temporal is unreachable', async () => {
    const r = await retryq(['list'], { TEMPORAL_ADDRESS: '127.0.0.1:9' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Cannot reach Temporal at 127.0.0.1:9');
  });
});
