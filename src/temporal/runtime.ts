/**
 * Installs the Temporal worker runtime once per process with retryq's logging choices and without the SDK's own
 * signal handlers: retryq's CLI handles SIGINT/SIGTERM itself so it can drain workers before stopping the server.
 *
 * With `logFile`, SDK logs go to that file as JSON lines (the terminal stays readable for the demo) and only
 * errors are also printed to stderr.
 *
 * @example
 * ```ts
 * import { installRuntime } from './runtime.js';
 * installRuntime({ level: 'WARN' }); // before creating any Worker or NativeConnection
 * ```
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import type { LogEntry, LogLevel } from '@temporalio/worker';

let installed = false;
let installedMetricsAddress: string | undefined;

export interface RuntimeSetup {
  /** Lowest level logged, for both the TypeScript SDK and the native core. @default 'WARN' */
  level?: LogLevel;
  /** Lowest level logged by the native core. @default 'ERROR' (its WARNs are routine for time-skipping tests) */
  coreLevel?: LogLevel;
  /** Write logs here (JSON lines) instead of stderr; errors are still printed to stderr. */
  logFile?: string;
  /**
   * `host:port` where the SDK's own Prometheus exporter listens (the workers' metrics: task slots, poll and
   * schedule-to-start latencies, sticky cache, and retryq's counters emitted through the SDK's metric meter).
   * retryq binds it to a loopback port and serves it together with its own metrics (see `worker-metrics.ts`).
   * @default none: the SDK records no metrics
   */
  sdkMetricsAddress?: string | undefined;
}

function logToFile(file: string): (entry: LogEntry) => void {
  mkdirSync(path.dirname(file), { recursive: true });
  const stream = createWriteStream(file, { flags: 'a' });
  return (entry) => {
    const at = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
    stream.write(JSON.stringify({ at, level: entry.level, message: entry.message, ...entry.meta }) + '\n');
    if (entry.level === 'ERROR') process.stderr.write(`${at} [ERROR] ${entry.message}\n`);
  };
}

/** Whether {@link installRuntime} ran in this process, and with the SDK's metrics where. */
export function runtimeInstalled(): { installed: boolean; sdkMetricsAddress: string | undefined } {
  return { installed, sdkMetricsAddress: installedMetricsAddress };
}

/** Installs the runtime; later calls are no-ops. */
export function installRuntime(setup: RuntimeSetup = {}): void {
  if (installed) return;
  installed = true;
  installedMetricsAddress = setup.sdkMetricsAddress;
  const level = setup.level ?? 'WARN';
  Runtime.install({
    logger: setup.logFile ? new DefaultLogger(level, logToFile(setup.logFile)) : new DefaultLogger(level),
    shutdownSignals: [],
    telemetryOptions: {
      logging: { filter: makeTelemetryFilterString({ core: setup.coreLevel ?? 'ERROR', other: level }) },
      ...(setup.sdkMetricsAddress
        ? {
            metrics: {
              prometheus: {
                bindAddress: setup.sdkMetricsAddress,
                // Prometheus conventions: counters end in _total, durations in seconds with the unit in the name.
                countersTotalSuffix: true,
                unitSuffix: true,
                useSecondsForDurations: true,
              },
            },
          }
        : {}),
    },
  });
}
