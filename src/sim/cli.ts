/**
 * The `provider-sim` command: parses flags with `node:util` `parseArgs`, starts the simulator,
 * prints its URL on stdout and closes cleanly on SIGINT/SIGTERM. Usage errors exit with code 2.
 */
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { untilStopped } from '../stop-signals.js';
import {
  isScenarioError,
  limitAlgorithms,
  limitHeaderFormats,
  loadScenarioFile,
  parseScenario,
  patchScenario,
} from './scenario.js';
import type { Scenario, ScenarioPatch } from './scenario.js';
import { startProviderSim } from './server.js';

/** Usage text printed by `--help` and after usage errors. */
export const usage = `Usage: tsx src/sim/main.ts [options]

Starts the simulated provider on loopback and prints its URL.

Options:
  --port N                          TCP port (default 0: any free port)
  --host HOST                       interface to bind (default 127.0.0.1)
  --scenario FILE                   scenario file (.json, .yaml or .yml)
  --rate-limit-per-minute N         default write limit per API key per minute
  --retry-after-format FORMAT       seconds | http-date
  --rate-limit-algorithm ALG        sliding-window | fixed-window | token-bucket
  --rate-limit-headers FORMAT       none | ietf | ietf-draft | x-ratelimit-seconds | x-ratelimit-epoch
  --clock-offset-ms N               server clock skew in ms (negative: --clock-offset-ms=-1500)
  --webhook-url URL                 where to POST completion webhooks
  -h, --help                        show this help
Flags override the same fields of the scenario file.`;

/** The parsed command line. */
export interface ProviderSimCliOptions {
  help: boolean;
  port: number;
  host: string;
  scenarioFile: string | undefined;
  /** Scenario fields set by flags. */
  overrides: ScenarioPatch;
}

function integerFlag(name: string, raw: string, min: number, max: number): number {
  const value = Number(raw);
  if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new UsageError({ path: `--${name}`, message: `expects an integer from ${min} to ${max}`, received: raw });
  }
  return value;
}

function oneOfFlag<T extends string>(name: string, raw: string, allowed: readonly T[]): T {
  const found = allowed.find((a) => a === raw);
  if (found === undefined) {
    throw new UsageError({ path: `--${name}`, message: `expects one of ${allowed.join(', ')}`, received: raw });
  }
  return found;
}

/** Parses argv (without node and the script). Throws `UsageError`. */
export function parseProviderSimArgs(argv: readonly string[]): ProviderSimCliOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        scenario: { type: 'string' },
        'rate-limit-per-minute': { type: 'string' },
        'retry-after-format': { type: 'string' },
        'rate-limit-algorithm': { type: 'string' },
        'rate-limit-headers': { type: 'string' },
        'clock-offset-ms': { type: 'string' },
        'webhook-url': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const overrides: ScenarioPatch = {};
  const rate = values['rate-limit-per-minute'];
  if (rate !== undefined) overrides.rateLimitPerMinute = integerFlag('rate-limit-per-minute', rate, 1, 1_000_000);
  const format = values['retry-after-format'];
  if (format !== undefined) {
    if (format !== 'seconds' && format !== 'http-date') {
      throw new UsageError({
        path: '--retry-after-format',
        message: "expects 'seconds' or 'http-date'",
        received: format,
      });
    }
    overrides.retryAfterFormat = format;
  }
  const rateLimit: Partial<Scenario['rateLimit']> = {};
  const algorithm = values['rate-limit-algorithm'];
  if (algorithm !== undefined) rateLimit.algorithm = oneOfFlag('rate-limit-algorithm', algorithm, limitAlgorithms);
  const headers = values['rate-limit-headers'];
  if (headers !== undefined) rateLimit.headers = oneOfFlag('rate-limit-headers', headers, limitHeaderFormats);
  if (Object.keys(rateLimit).length > 0) overrides.rateLimit = rateLimit;
  const offset = values['clock-offset-ms'];
  if (offset !== undefined) {
    overrides.clockOffsetMs = integerFlag('clock-offset-ms', offset, -365 * 86_400_000, 365 * 86_400_000);
  }
  const webhookUrl = values['webhook-url'];
  if (webhookUrl !== undefined) {
    if (!/^https?:\/\//i.test(webhookUrl) || !URL.canParse(webhookUrl)) {
      throw new UsageError({
        path: '--webhook-url',
        message: 'expects an http:// or https:// URL',
        received: webhookUrl,
      });
    }
    overrides.webhookUrl = webhookUrl;
  }
  const host = values.host ?? '127.0.0.1';
  if (host.trim() === '') throw new UsageError({ path: '--host', message: 'must not be empty' });
  return {
    help: values.help ?? false,
    port: values.port === undefined ? 0 : integerFlag('port', values.port, 0, 65_535),
    host,
    scenarioFile: values.scenario,
    overrides,
  };
}

/** Where the CLI writes and which signals end it. */
export interface ProviderSimCliIo {
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  /** Resolves when the process should shut down. @default the first SIGINT or SIGTERM */
  shutdown?: Promise<unknown>;
}

async function loadScenario(options: ProviderSimCliOptions): Promise<Scenario> {
  const base = options.scenarioFile === undefined ? parseScenario({}) : await loadScenarioFile(options.scenarioFile);
  const { rateLimit, ...rest } = options.overrides;
  // `rateLimit` flags set single fields inside it; the file's other rateLimit fields (buckets, …) stay.
  const patch: ScenarioPatch =
    rateLimit === undefined ? rest : { ...rest, rateLimit: { ...base.rateLimit, ...rateLimit } };
  return patchScenario(base, patch, 'flags');
}

/** Runs the CLI; resolves with the exit code (0 after a clean shutdown, 2 for usage errors, 1 otherwise). */
export async function runProviderSimCli(argv: readonly string[], io: ProviderSimCliIo): Promise<number> {
  let options: ProviderSimCliOptions;
  let scenario: Scenario;
  try {
    options = parseProviderSimArgs(argv);
    if (options.help) {
      io.stdout(usage);
      return 0;
    }
    scenario = await loadScenario(options);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`provider-sim: ${error.message}\n\n${usage}`);
      return 2;
    }
    if (isScenarioError(error)) {
      io.stderr(`provider-sim: ${error.message}`);
      return 2;
    }
    const code = (error as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') {
      io.stderr(`provider-sim: cannot read the scenario file: ${(error as Error).message}`);
      return 2;
    }
    throw error;
  }
  const shutdown = io.shutdown ?? untilStopped();
  let sim;
  try {
    sim = await startProviderSim({
      port: options.port,
      host: options.host,
      scenario,
      onError: (error) =>
        io.stderr(
          `provider-sim: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        ),
    });
  } catch (error) {
    io.stderr(
      `provider-sim: cannot listen on ${options.host}:${options.port}: ${error instanceof Error ? error.message : String(error)}`,
    );
    return 1;
  }
  io.stdout(sim.url);
  const keys = scenario.keys.map((k) => k.id ?? k.key).join(', ');
  io.stderr(
    `provider-sim: listening on ${sim.url} (keys: ${keys}; ${scenario.rateLimitPerMinute}/min per key; ` +
      `metrics: ${sim.url}/_sim/metrics); Ctrl-C to stop`,
  );
  const signal = await shutdown;
  await sim.close();
  io.stderr(`provider-sim: closed${typeof signal === 'string' ? ` on ${signal}` : ''}`);
  return 0;
}
