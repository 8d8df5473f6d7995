/**
 * Test environments for retryq and for your own workflows, started from the locally resolved Temporal binaries
 * (no internet needed; see `src/temporal/binaries.ts`).
 *
 * - {@link createTimeSkippingEnvironment}: the time-skipping test server. A workflow that sleeps for days
 *   completes in milliseconds; use `env.sleep()` to move time forward.
 * - {@link createDevServerEnvironment}: a real dev server (in-memory SQLite, no UI) with retryq's search
 *   attributes registered, for what the test server lacks (visibility queries, id conflict policies).
 *
 * Both are the SDK's own `TestWorkflowEnvironment`, built through its public options with retryq's binary resolver
 * (`server.executable: { type: 'existing-path' }`), so everything in the Temporal testing docs applies and
 * `teardown()` stops the server. When no local binary is available they fall back to the SDK's own download.
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
import type { ResolvedBinary } from './temporal/binaries.js';
import { resolveTemporalCli, resolveTestServer } from './temporal/binaries.js';
import { registerSearchAttributes } from './temporal/register-search-attributes.js';
import { freePort } from './temporal/server-process.js';
import { retryqSearchAttributes } from './search-attributes.js';

export { cachedWorkflowBundle } from './temporal/workflow-bundle.js';

// Why not retryq's own launcher (src/temporal/server-process.ts) here: the SDK's public options start and stop the
// server themselves, and an environment built any other way needs the SDK's private factory. What the public API
// cannot give is kept small: the port is chosen by retryq's `freePort` (below the ephemeral range, checked free:
// the SDK's own pick is an OS-assigned ephemeral port, which an outgoing connection may take before the server binds
// it). The SDK neither refuses a port another process holds nor reports a server that exits during start-up (it
// polls the port for 5 s); `retryq dev`, which runs long-lived servers on fixed ports, keeps those checks through
// server-process.ts.

/** The resolved binary as the SDK's `executable` option; `undefined` leaves the SDK's cached download. */
function executableOf(bin: ResolvedBinary): { type: 'existing-path'; path: string } | undefined {
  return bin.path === undefined ? undefined : { type: 'existing-path', path: bin.path };
}

export interface TimeSkippingEnvironmentOptions {
  /** Search attributes to register. @default retryq's own */
  searchAttributes?: readonly SearchAttributeKey<SearchAttributeType>[];
}

/** Starts the time-skipping test server from the resolved binary, registers search attributes, connects. */
export async function createTimeSkippingEnvironment(
  opts: TimeSkippingEnvironmentOptions = {},
): Promise<TestWorkflowEnvironment> {
  const executable = executableOf(await resolveTestServer());
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { ...(executable ? { executable } : {}), port: await freePort() },
  });
  try {
    await registerSearchAttributes(env.connection, env.namespace ?? 'default', opts.searchAttributes);
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
  /** Extra `temporal server start-dev` arguments, e.g. dynamic config (`--dynamic-config-value K=V`). */
  extraArgs?: string[];
}

/** Starts a dev server (no UI) from the resolved CLI with retryq's search attributes, and connects to it. */
export async function createDevServerEnvironment(
  opts: DevServerEnvironmentOptions = {},
): Promise<TestWorkflowEnvironment> {
  const executable = executableOf(await resolveTemporalCli());
  const ip = '127.0.0.1';
  return TestWorkflowEnvironment.createLocal({
    server: {
      ...(executable ? { executable } : {}),
      ip,
      port: await freePort(ip),
      searchAttributes: [...(opts.searchAttributes ?? retryqSearchAttributes)],
      ...(opts.dbFile ? { dbFilename: opts.dbFile } : {}),
      ...(opts.extraArgs ? { extraArgs: opts.extraArgs } : {}),
    },
  });
}
