/**
 * Installs the Temporal worker runtime once per process with retryq's logging choices and without the SDK's own
 * signal handlers: retryq's CLI handles SIGINT/SIGTERM itself so it can drain workers before stopping the server.
 *
 * With `log` (`retryq dev`), the SDK's logs, the native core's included, go to that file as JSON lines (the
 * terminal stays readable for the demo, and a Temporal server's outage does not flood it with the core's
 * reconnect warnings); only the TypeScript SDK's errors are also printed to stderr.
 *
 * @example
 * ```ts
 * import { installRuntime } from './runtime.js';
 * installRuntime({ level: 'WARN' }); // before creating any Worker or NativeConnection
 * ```
 */
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import type { LogEntry, LogLevel, LogMetadata } from '@temporalio/worker';

let installed = false;
let installedMetricsAddress: string | undefined;

/** Where the runtime writes its log records (JSON lines): `retryq dev`'s log file is one. */
export interface RuntimeLog {
  /** Appends one record. */
  write(record: Record<string, unknown>): void;
}

export interface RuntimeSetup {
  /** Lowest level logged, for both the TypeScript SDK and the native core. @default 'WARN' */
  level?: LogLevel;
  /** Lowest level logged by the native core. @default 'ERROR' (its WARNs are routine for time-skipping tests) */
  coreLevel?: LogLevel;
  /** Write logs here (JSON lines), the native core's too, instead of stderr; SDK errors are still printed to stderr. */
  log?: RuntimeLog;
  /**
   * `host:port` where the SDK's own Prometheus exporter listens (the workers' metrics: task slots, poll and
   * schedule-to-start latencies, sticky cache, and retryq's counters emitted through the SDK's metric meter).
   * retryq binds it to a loopback port and serves it together with its own metrics (see `worker-metrics.ts`).
   * @default none: the SDK records no metrics
   */
  sdkMetricsAddress?: string | undefined;
}

/**
 * What the SDK says, at WARN or INFO, about a worker that polls one kind of task only. retryq runs such workers by
 * design (its entity worker runs no activities, its dispatch and inspection workers run no workflows), so the lines
 * describe the intended topology, not a problem: logged at DEBUG, so that `retryq worker` does not start with three
 * warnings per credential that suggest a misconfiguration.
 */
export const BY_DESIGN_SDK_MESSAGES: ReadonlySet<string> = new Set([
  'No workflows registered, not polling for workflow tasks',
  'No activities registered, not polling for activity tasks',
  'No Nexus services registered, not polling for Nexus tasks',
]);

/** The SDK's default logger, with {@link BY_DESIGN_SDK_MESSAGES} at DEBUG. */
export class RetryqLogger extends DefaultLogger {
  override log(level: LogLevel, message: string, meta?: LogMetadata): void {
    super.log(BY_DESIGN_SDK_MESSAGES.has(message) && level !== 'TRACE' ? 'DEBUG' : level, message, meta);
  }
}

function logTo(log: RuntimeLog): (entry: LogEntry) => void {
  return (entry) => {
    const at = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
    log.write({ at, level: entry.level, message: entry.message, ...entry.meta });
    // The core's errors during a server outage are what the supervisor reports in its own words.
    if (entry.level === 'ERROR' && entry.meta?.['sdkComponent'] !== 'core')
      process.stderr.write(`${at} [ERROR] ${entry.message}\n`);
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
    logger: setup.log ? new RetryqLogger(level, logTo(setup.log)) : new RetryqLogger(level),
    shutdownSignals: [],
    telemetryOptions: {
      logging: {
        filter: makeTelemetryFilterString({ core: setup.coreLevel ?? 'ERROR', other: level }),
        // With a log file, the core's lines go through the logger above (to the file), not straight to stderr.
        ...(setup.log ? { forward: {} } : {}),
      },
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
