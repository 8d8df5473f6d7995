/**
 * Opens connections to the Temporal server the config points at (the SDK's environment configuration), for the
 * client side and for workers.
 *
 * @example
 * ```ts
 * import { loadConfig } from '../config.js';
 * import { connectClient } from './connect.js';
 * const { client, close } = await connectClient(loadConfig().temporal);
 * ```
 */
import { Client, Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { ClientConnectConfig } from '@temporalio/envconfig';
import { TemporalUnreachableError } from '../errors.js';

/** The Temporal connection, from the SDK's environment configuration. */
export interface TemporalConfig {
  /** `true` when an address was configured: connect there and start no embedded server. */
  external: boolean;
  address: string;
  namespace: string;
  /** Connection options for `Connection.connect` / `NativeConnection.connect` (may hold an API key: never log). */
  connect: ClientConnectConfig;
}

/**
 * The error for a server that did not answer, with what to do: with no `TEMPORAL_ADDRESS` configured retryq looks
 * for `retryq dev`'s server, which an application starts with `npx retryq dev`.
 */
export function unreachable(
  config: Pick<TemporalConfig, 'address' | 'external'>,
  err: unknown,
): TemporalUnreachableError {
  const hint = config.external
    ? 'Check TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and the TLS / API key settings.'
    : `TEMPORAL_ADDRESS is not set, so retryq looked for a local dev server at ${config.address}. Start one with ` +
      "`npx retryq dev` (Temporal, its Web UI and the workers), or set TEMPORAL_ADDRESS to your cluster's host:port.";
  return new TemporalUnreachableError(
    `Cannot reach Temporal at ${config.address}: ${(err as Error).message?.split('\n')[0] ?? String(err)}. ${hint}`,
  );
}

function clientOptions(config: TemporalConfig) {
  const o = config.connect.connectionOptions;
  return {
    address: config.address,
    ...(o.tls !== undefined ? { tls: o.tls } : {}),
    ...(o.apiKey !== undefined && typeof o.apiKey === 'string' ? { apiKey: o.apiKey } : {}),
    ...(o.metadata !== undefined ? { metadata: o.metadata } : {}),
  };
}

/** A Temporal client for the configured namespace. */
export async function connectClient(
  config: TemporalConfig,
): Promise<{ client: Client; connection: Connection; close: () => Promise<void> }> {
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...clientOptions(config), connectTimeout: 5000 });
  } catch (err) {
    throw unreachable(config, err);
  }
  return {
    client: new Client({ connection, namespace: config.namespace }),
    connection,
    close: () => connection.close(),
  };
}

/**
 * A Temporal client whose connection is made on first use and re-made after the server comes back: for long-running
 * servers (the webhook receiver) that must start, and answer, while Temporal is down.
 */
export function lazyClient(config: TemporalConfig): { client: Client; close: () => Promise<void> } {
  const connection = Connection.lazy({ ...clientOptions(config), connectTimeout: 5000 });
  return { client: new Client({ connection, namespace: config.namespace }), close: () => connection.close() };
}

/**
 * A worker connection to the configured server. `@temporalio/worker` (a native addon) is loaded here, on first
 * use, so that the client side (`retryq`, `RetryqClient.connect`) never loads it.
 */
export async function connectWorker(config: TemporalConfig): Promise<NativeConnection> {
  const { NativeConnection } = await import('@temporalio/worker');
  try {
    return await NativeConnection.connect({ ...config.connect.connectionOptions, address: config.address });
  } catch (err) {
    throw unreachable(config, err);
  }
}
