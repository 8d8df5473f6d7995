/**
 * retryq as an application installs it: `npm pack`, the tarball installed into a fresh application outside the
 * repository (offline, from the npm cache that `npm ci` filled), then, with plain `node` only (no tsx, no
 * TypeScript):
 * - the workers run from the installed package's bin (`npx retryq worker`), the simulated provider too
 *   (`npx retryq sim`), against a real Temporal dev server;
 * - an `.mjs` file submits an intent through `import { RetryqClient } from 'retryq'` and follows it to success;
 * - `npx retryq status … --json` prints one JSON document on stdout.
 * And a TypeScript consumer (plus every entry point's @example) type-checks against the shipped `.d.ts` with
 * `strict` on.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDevServerEnvironment } from '../../src/testing.js';
import { installPacked, npm, packRetryq, repo, sh } from '../support/packed-package.js';

let tmp: string;
let app: string;
let env: TestWorkflowEnvironment;
const children: ChildProcess[] = [];

/** Starts a long-running command in the app and resolves once `ready` matches its output. */
async function start(args: string[], extraEnv: NodeJS.ProcessEnv, ready: RegExp): Promise<{ output: () => string }> {
  const child = spawn(npm, ['exec', '--offline', '--', ...args], {
    cwd: app,
    env: { ...process.env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (ready.test(out)) {
        clearInterval(timer);
        resolve();
      }
    }, 100);
    child.once('exit', (code) => {
      clearInterval(timer);
      reject(new Error(`\`${args.join(' ')}\` exited (${code}) before it was ready:\n${out}`));
    });
  });
  return { output: () => out };
}

async function stopAll(): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', () => resolve());
          try {
            process.kill(-c.pid!, 'SIGTERM'); // the whole group: npm exec and the node it started
          } catch {
            resolve();
          }
        }),
    ),
  );
}

beforeAll(async () => {
  // The package as it would be published, installed offline from the npm cache that `npm ci` filled.
  tmp = await mkdtemp(path.join(os.tmpdir(), 'retryq-consumer-'));
  const tarball = await packRetryq(tmp);
  app = path.join(tmp, 'app');
  await mkdir(app);
  const repoPkg = JSON.parse(await readFile(path.join(repo, 'package.json'), 'utf8')) as {
    devDependencies: Record<string, string>;
  };
  await writeFile(
    path.join(app, 'package.json'),
    JSON.stringify({
      name: 'consumer-app',
      version: '1.0.0',
      private: true,
      type: 'module',
      // @temporalio/testing: the optional peer, for the type check of retryq/testing.
      dependencies: { retryq: '^0.1.0', '@temporalio/testing': repoPkg.devDependencies['@temporalio/testing'] },
    }),
  );
  await installPacked(app, tarball);
  env = await createDevServerEnvironment();
}, 300_000);

afterAll(async () => {
  await stopAll();
  await env?.teardown();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('an application that installed the packed retryq', () => {
  it('has no development tools: no tsx, no sources, only the built package', () => {
    expect(existsSync(path.join(app, 'node_modules', 'tsx'))).toBe(false);
    expect(existsSync(path.join(app, 'node_modules', 'typescript'))).toBe(false);
    expect(existsSync(path.join(app, 'node_modules', 'retryq', 'src'))).toBe(false);
    expect(existsSync(path.join(app, 'node_modules', 'retryq', 'dist', 'index.js'))).toBe(true);
  });

  it('submits an intent with plain node while `npx retryq worker` serves it, and the intent succeeds', async () => {
    const scenario = path.join(app, 'provider.json');
    await writeFile(scenario, JSON.stringify({ keys: [{ key: 'sk_test_consumer', id: 'consumer' }] }));
    const sim = await start(['retryq', 'sim', '--port', '0', '--scenario', scenario], {}, /http:\/\/127\.0\.0\.1:\d+/);
    const simUrl = /http:\/\/127\.0\.0\.1:\d+/.exec(sim.output())![0];

    const prefix = `consumer-${randomUUID().slice(0, 8)}`;
    const config = {
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_NAMESPACE: 'default',
      RETRYQ_TASK_QUEUE_PREFIX: prefix,
      RETRYQ_CREDENTIALS: JSON.stringify([{ id: 'consumer', secretEnv: 'CONSUMER_KEY' }]),
      CONSUMER_KEY: 'sk_test_consumer',
    };
    await start(['retryq', 'worker'], config, /retryq workers polling/);

    const key = `consumer-${randomUUID()}`;
    await writeFile(
      path.join(app, 'submit.mjs'),
      `import { RetryqClient } from 'retryq';

const [key, provider] = process.argv.slice(2);
const retryq = await RetryqClient.connect();
const submitted = await retryq.submit({
  idempotencyKey: key,
  credential: 'consumer',
  action: { method: 'POST', url: provider + '/v1/charges', body: { amount: 1200, currency: 'eur' } },
  inspection: { url: provider + '/v1/operations/{idempotencyKey}' },
  deadline: '5m',
});
const outcome = await retryq.result(submitted.key);
const status = await retryq.status(submitted.key);
console.log(JSON.stringify({ submitted, outcome, status }));
await retryq.close();
`,
    );
    const { stdout } = await sh(process.execPath, ['submit.mjs', key, simUrl], app, config);
    const { submitted, outcome, status } = JSON.parse(stdout) as {
      submitted: { key: string; attached: boolean };
      outcome: { phase: string; attempts: number; result: { status: number; body: { status: string } } };
      status: { phase: string };
    };
    expect(submitted).toMatchObject({ key, attached: false });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, result: { status: 201 } });
    expect(status.phase).toBe('succeeded');

    // The provider saw exactly one operation under the key.
    const metrics = (await (await fetch(`${simUrl}/_sim/metrics`)).json()) as {
      keys: Record<string, { billableOperations: number }>;
    };
    expect(metrics.keys['consumer']?.billableOperations).toBe(1);

    // The CLI of the installed package, as scripts call it: one JSON document on stdout.
    const cli = await sh(npm, ['exec', '--offline', '--', 'retryq', 'status', key, '--json'], app, config);
    expect((JSON.parse(cli.stdout) as { phase: string; idempotencyKey: string }).phase).toBe('succeeded');
  }, 180_000);

  it('type-checks a strict TypeScript consumer and every entry point example against the shipped .d.ts', async () => {
    const dir = path.join(app, 'ts');
    await mkdir(dir);
    await writeFile(
      path.join(dir, 'consumer.ts'),
      `import {
  ConfigError,
  IdempotencyConflictError,
  IntentNotFoundError,
  IntentValidationError,
  Phase,
  RetryqClient,
  TemporalUnreachableError,
  workflowIdOf,
} from 'retryq';
import type { IntentInput, IntentOutcome, IntentStatus, Submitted } from 'retryq';
import { createWorkers, loadConfig, taskQueues } from 'retryq/worker';
import type { RetryqConfig, RetryqWorkers } from 'retryq/worker';
import { intentWorkflow, statusQuery } from 'retryq/workflows';
import { createRetryingFetch, retryingFetch } from 'retryq/proxy';
import type { RetryingResponse } from 'retryq/proxy';
import { classify, nextAttempt, parseRetryAfter } from 'retryq/policy';
import type { Decision } from 'retryq/policy';
import { createDevServerEnvironment } from 'retryq/testing';

export async function consume(): Promise<IntentOutcome | undefined> {
  const retryq: RetryqClient = await RetryqClient.connect({ env: { TEMPORAL_ADDRESS: 'localhost:7233' } });
  const intent: IntentInput = {
    idempotencyKey: 'order-1',
    credential: 'acme-prod',
    action: { method: 'POST', url: 'https://api.example.com/v1/charges', body: { amount: 1 } },
    inspection: { url: 'https://api.example.com/v1/operations/{idempotencyKey}' },
  };
  try {
    const submitted: Submitted = await retryq.submit(intent);
    const status: IntentStatus = await retryq.status(submitted.key);
    if (status.phase === Phase.waiting) console.log(status.nextAttemptAt);
    return await retryq.result(workflowIdOf(submitted.key).slice('intent:'.length));
  } catch (err) {
    if (err instanceof IdempotencyConflictError || err instanceof IntentValidationError) return undefined;
    if (err instanceof IntentNotFoundError || err instanceof ConfigError || err instanceof TemporalUnreachableError)
      throw err;
    throw err;
  } finally {
    await retryq.close();
  }
}

export function roles(config: RetryqConfig): [typeof createWorkers, RetryqWorkers | undefined, string] {
  return [createWorkers, undefined, taskQueues(config.taskQueuePrefix).workflows + loadConfig.name];
}

export const workflow: typeof intentWorkflow = intentWorkflow;
export const query: string = statusQuery.name;
export async function read(): Promise<number> {
  const res: RetryingResponse = await retryingFetch('http://localhost:9/', { maxRetries: 0 });
  const own = createRetryingFetch({ maxWait: '1s' });
  await own.close();
  return res.retryq.attempts;
}
export const decision: Decision = classify({ method: 'GET', status: 503, sent: 'yes' }, { now: new Date(0) });
export const next = nextAttempt;
export const parsed = parseRetryAfter('120', { now: new Date(0) });
export const testEnv = createDevServerEnvironment;
`,
    );
    // Each entry point's @example, as a user would paste it.
    const entries: Record<string, string> = {
      index: 'src/index.ts',
      worker: 'src/worker.ts',
      workflows: 'src/workflows/index.ts',
      proxy: 'src/proxy/index.ts',
      policy: 'src/policy/index.ts',
      testing: 'src/testing.ts',
    };
    for (const [name, file] of Object.entries(entries)) {
      const doc = /^\/\*\*[\s\S]*?\*\//.exec(await readFile(path.join(repo, file), 'utf8'))![0];
      const example = /@example\s*\n\s*\* ```ts\n([\s\S]*?)\n\s*\* ```/.exec(doc)![1]!;
      const code = example
        .split('\n')
        .map((l) => l.replace(/^\s*\* ?/, ''))
        .join('\n');
      await writeFile(path.join(dir, `example-${name}.ts`), `${code}\nexport {};\n`);
    }
    await writeFile(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2023'],
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          typeRoots: [path.join(repo, 'node_modules', '@types')],
        },
        include: ['*.ts'],
      }),
    );
    const tsc = path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
    // A control: a consumer mistake must be reported, so the check could fail.
    await writeFile(path.join(dir, 'broken.ts'), `import { RetryqClient } from 'retryq';\nnew RetryqClient({});\n`);
    const result = await sh(process.execPath, [tsc, '-p', dir], app).catch((err: { stdout: string }) => err);
    // skipLibCheck is off so that retryq's own .d.ts files are checked too. The Temporal SDK's declarations do not
    // compile under exactOptionalPropertyTypes (and miss @types/ms): errors located in other packages are theirs.
    const errors = result.stdout
      .split('\n')
      .filter((line) => /^\S.*\(\d+,\d+\): error/.test(line))
      .filter((line) => !line.startsWith('node_modules/') || line.startsWith('node_modules/retryq/'));
    expect(errors.filter((line) => !line.startsWith('ts/broken.ts('))).toEqual([]);
    expect(errors.length, result.stdout).toBeGreaterThan(0);
  }, 240_000);
});
