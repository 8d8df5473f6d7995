/**
 * Installs the Temporal worker runtime once per process with retryq's logging choices and without the SDK's own
 * signal handlers: retryq's CLI handles SIGINT/SIGTERM itself so it can drain workers before stopping the server.
 *
 * @example
 * ```ts
 * import { installRuntime } from './runtime.js';
 * installRuntime({ level: 'WARN' }); // before creating any Worker or NativeConnection
 * ```
 */
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import type { LogLevel } from '@temporalio/worker';

let installed = false;

export interface RuntimeSetup {
  /** Lowest level printed, for both the TypeScript SDK and the native core. @default 'WARN' */
  level?: LogLevel;
  /** Lowest level printed by the native core. @default 'ERROR' (its WARNs are routine for time-skipping tests) */
  coreLevel?: LogLevel;
}

/** Installs the runtime; later calls are no-ops. */
export function installRuntime(setup: RuntimeSetup = {}): void {
  if (installed) return;
  installed = true;
  const level = setup.level ?? 'WARN';
  Runtime.install({
    logger: new DefaultLogger(level),
    shutdownSignals: [],
    telemetryOptions: {
      logging: { filter: makeTelemetryFilterString({ core: setup.coreLevel ?? 'ERROR', other: level }) },
    },
  });
}
