/**
 * Test environments for retryq and for your own workflows, started from the locally resolved Temporal binaries
 * (no internet needed; see `src/temporal/binaries.ts`).
 *
 * - {@link createTimeSkippingEnvironment}: the time-skipping test server. A workflow that sleeps for days
 *   completes in milliseconds; use `env.sleep()` to move time forward.
 * - {@link createDevServerEnvironment}: a real dev server (in-memory SQLite, no UI) with retryq's search
 *   attributes registered, for what the test server lacks (visibility queries, id conflict policies).
 *
 * Both return the SDK's `TestWorkflowEnvironment`, so everything in the Temporal testing docs applies; their
 * `teardown()` also stops the server process. When no local binary is available they fall back to the SDK's own
 * download.
 *
 * @example
 * ```ts
 * import { Worker } from '@temporalio/worker';
 * import { cachedWorkflowBundle, createTimeSkippingEnvironment } from 'retryq/testing';
 *
 * const env = await createTimeSkippingEnvironment(); // needs @temporalio/testing installed (an optional peer)
 * const workflowBundle = await cachedWorkflowBundle({ workflowsPath: './src/workflows.ts' });
 * const worker = await Worker.create({ connection: env.nativeConnection, taskQueue: 'test', workflowBundle });
 * await worker.runUntil(env.client.workflow.execute('myWorkflow', { taskQueue: 'test', workflowId: 'wf-1' }));
 * await env.teardown();
 * ```
 *
 * @module
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes.js';
import { resolveTemporalCli, resolveTestServer } from './temporal/binaries.js';
import { registerSearchAttributes } from './temporal/register-search-attributes.js';
import { startDevServer, startTestServer } from './temporal/server-process.js';
import type { ManagedServer } from './temporal/server-process.js';
import { retryqSearchAttributes } from './search-attributes.js';

export { cachedWorkflowBundle } from './temporal/workflow-bundle.js';

/** The SDK's private factory; typed here so the one place that relies on it is explicit. */
type CreateFn = (opts: {
  server: { type: 'existing' };
  supportsTimeSkipping: boolean;
  namespace: string;
  address: string;
  connectionOptions?: Record<string, never>;
}) => Promise<RetryqTestEnvironment>;

/**
 * The SDK's test environment plus ownership of the server process: `teardown()` closes the connections and
 * then stops the server.
 */
export class RetryqTestEnvironment extends TestWorkflowEnvironment {
  /** The server process retryq started, when it started one. */
  managedServer: ManagedServer | undefined;

  override async teardown(): Promise<void> {
    await super.teardown();
    await this.managedServer?.stop();
  }

  /** @internal Connects to a server we started, with or without the time-skipping test service. */
  static async attach(server: ManagedServer, supportsTimeSkipping: boolean): Promise<RetryqTestEnvironment> {
    // `TestWorkflowEnvironment.create` is private in the typings but is the SDK's own way to build an environment
    // around an existing address; it is the only way to keep time skipping while owning the server process.
    const create = (TestWorkflowEnvironment as unknown as { create?: CreateFn }).create;
    if (typeof create !== 'function') {
      await server.stop();
      throw new Error('This @temporalio/testing version has no TestWorkflowEnvironment.create; pin 1.24.x.');
    }
    try {
      const env = await create.call(RetryqTestEnvironment, {
        server: { type: 'existing' },
        supportsTimeSkipping,
        namespace: 'default',
        address: server.address,
      });
      env.managedServer = server;
      return env;
    } catch (err) {
      await server.stop();
      throw err;
    }
  }
}

export interface TimeSkippingEnvironmentOptions {
  /** Search attributes to register. @default retryq's own */
  searchAttributes?: readonly SearchAttributeKey<SearchAttributeType>[];
}

/** Starts the time-skipping test server from the resolved binary, registers search attributes, connects. */
export async function createTimeSkippingEnvironment(
  opts: TimeSkippingEnvironmentOptions = {},
): Promise<TestWorkflowEnvironment> {
  const bin = await resolveTestServer();
  const env = bin.path
    ? await RetryqTestEnvironment.attach(await startTestServer({ path: bin.path }), true)
    : await TestWorkflowEnvironment.createTimeSkipping();
  return withSearchAttributes(env, opts.searchAttributes ?? retryqSearchAttributes);
}

async function withSearchAttributes(
  env: TestWorkflowEnvironment,
  keys: readonly SearchAttributeKey<SearchAttributeType>[],
): Promise<TestWorkflowEnvironment> {
  try {
    await registerSearchAttributes(env.connection, env.namespace ?? 'default', keys);
  } catch (err) {
    await env.teardown();
    throw err;
  }
  return env;
}

export interface DevServerEnvironmentOptions {
  /** Search attributes to register. @default retryq's own */
  searchAttributes?: readonly SearchAttributeKey<SearchAttributeType>[];
  /** SQLite file, for tests about persistence. @default in memory */
  dbFile?: string;
}

/** Starts a dev server (no UI) from the resolved CLI, registers search attributes, and connects to it. */
export async function createDevServerEnvironment(
  opts: DevServerEnvironmentOptions = {},
): Promise<TestWorkflowEnvironment> {
  const searchAttributes = opts.searchAttributes ?? retryqSearchAttributes;
  const bin = await resolveTemporalCli();
  if (!bin.path) {
    return TestWorkflowEnvironment.createLocal({ server: { searchAttributes: [...searchAttributes] } });
  }
  const server = await startDevServer({ cliPath: bin.path, ...(opts.dbFile ? { dbFile: opts.dbFile } : {}) });
  return withSearchAttributes(await RetryqTestEnvironment.attach(server, false), searchAttributes);
}
