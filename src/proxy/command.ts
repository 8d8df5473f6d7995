/**
 * `retryq proxy`: starts the synchronous retrying proxy, prints where it listens, and stops cleanly on
 * SIGINT or SIGTERM.
 *
 * ```
 * retryq proxy --upstream NAME=URL [--upstream NAME=URL …] [--config FILE] [--host HOST] [--port PORT]
 *              [--max-retries N] [--max-retries-ceiling N] [--max-wait DURATION]
 *              [--attempt-timeout DURATION] [--no-gate]
 * ```
 * Exit codes: 0 stopped cleanly (or `--help`), 1 the proxy could not start (e.g. the port is in use),
 * 2 usage error (a bad flag, value or config file), with a message that names it.
 *
 * @example
 * ```ts
 * import { proxyCommand } from './src/proxy/command.js';
 * const io = { out: (s: string) => console.log(s), err: (s: string) => console.error(s) };
 * // Listens on http://127.0.0.1:8787 until SIGINT/SIGTERM; GET /acme/users/42 → https://api.acme.test/v1/users/42
 * process.exitCode = await proxyCommand(['--upstream', 'acme=https://api.acme.test/v1'], io);
 * ```
 *
 * @module
 */

import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { ProxyConfigError, UsageError } from '../errors.js';
import { untilStopped } from '../stop-signals.js';
import type { ProxyOptions } from './options.js';
import type { RunningProxy } from './server.js';
import { startProxy } from './server.js';

/** Where the command writes: one line per call. */
export interface CommandIo {
  out(s: string): void;
  err(s: string): void;
}

/** Exit codes of {@link proxyCommand}. */
export const ProxyExitCode = { ok: 0, failure: 1, usage: 2 } as const;

/** The text of `retryq proxy --help`. */
export const proxyUsage = `Usage: retryq proxy --upstream NAME=URL [--upstream NAME=URL …] [options]

Forwards http://HOST:PORT/NAME/path?query to URL/path?query. GET, HEAD and OPTIONS are retried on
408, 429, 502, 503 and 504 (a timeout counts as 408, an unreachable upstream as 502), honouring
Retry-After up to the cap; every other method is forwarded once.

Options:
  --upstream NAME=URL          an upstream (repeatable); URL is http(s):// with an optional base path
  --config FILE                JSON or YAML file with the options of the proxy; flags win over it
  --host HOST                  address to listen on (default 127.0.0.1)
  --port PORT                  port to listen on, 0 for any free one (default 8787)
  --max-retries N              retries per request unless Retryq-Max-Retries says (default 3)
  --max-retries-ceiling N      largest Retryq-Max-Retries honoured; larger is clamped (default 10)
  --max-wait DURATION          cap on one wait before a retry, e.g. 15s (default 15s)
  --attempt-timeout DURATION   time an attempt may wait for the response headers (default 10s)
  --no-gate                    do not answer locally with 429 after an upstream's 429 + Retry-After
  -h, --help                   show this help

Request headers:  Retryq-Max-Retries: N   Retryq-Deadline-Ms: MS
Response headers: Retryq-Attempts, Retryq-Wait-Ms, Retryq-Gated, Retryq-Outcome, Retryq-Max-Retries-Clamped
Metrics: GET /metrics (Prometheus text).  Exit codes: 0 ok, 1 could not start, 2 usage error.`;

/** Flag → option path, to name the flag in validation messages. */
const flagOf: Readonly<Record<string, string>> = {
  upstreams: '--upstream',
  host: '--host',
  port: '--port',
  maxRetries: '--max-retries',
  maxRetriesCeiling: '--max-retries-ceiling',
  maxWait: '--max-wait',
  attemptTimeout: '--attempt-timeout',
  gate: '--no-gate',
};

/**
 * Runs `retryq proxy`.
 *
 * @param argv - the arguments after `proxy`
 * @param io - where to print (lines without trailing newlines)
 * @param options - `signal` stops the proxy as SIGINT/SIGTERM would (for embedding and tests)
 * @returns the exit code: see {@link ProxyExitCode}
 */
export async function proxyCommand(
  argv: string[],
  io: CommandIo,
  options: { signal?: AbortSignal | undefined } = {},
): Promise<number> {
  let proxyOptions: ProxyOptions;
  let fromFlags: Set<string>;
  let configFile: string | undefined;
  try {
    const parsed = parseFlags(argv);
    if (parsed === 'help') {
      io.out(proxyUsage);
      return ProxyExitCode.ok;
    }
    configFile = parsed.config;
    ({ options: proxyOptions, fromFlags } = await buildOptions(parsed));
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`retryq proxy: ${err.message}`);
      io.err('Run `retryq proxy --help` for usage.');
      return ProxyExitCode.usage;
    }
    throw err;
  }

  let proxy: RunningProxy;
  try {
    proxy = await startProxy(proxyOptions, { log: (line) => io.err(line) });
  } catch (err) {
    if (err instanceof ProxyConfigError) {
      io.err(`retryq proxy: invalid configuration:`);
      for (const problem of err.problems) {
        const root = problem.path.split('.')[0] ?? '';
        const where = fromFlags.has(root)
          ? (flagOf[root] ?? root)
          : configFile === undefined
            ? problem.path
            : `${configFile}: ${problem.path}`;
        const detail = fromFlags.has(root) && problem.path !== root ? ` (${problem.path})` : '';
        io.err(`  - ${where}${detail}: ${problem.message}`);
      }
      io.err('Run `retryq proxy --help` for usage.');
      return ProxyExitCode.usage;
    }
    const code = (err as { code?: unknown }).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
      io.err(
        `retryq proxy: cannot listen on ${proxyOptions.host ?? '127.0.0.1'}:${proxyOptions.port ?? 8787} (${String(code)}); ` +
          'choose another with --host / --port',
      );
      return ProxyExitCode.failure;
    }
    io.err(`retryq proxy: could not start: ${err instanceof Error ? err.message : String(err)}`);
    return ProxyExitCode.failure;
  }

  io.out(`retryq proxy listening on ${proxy.url}`);
  for (const upstream of proxy.settings.upstreams.values()) {
    io.out(`  ${proxy.url}/${upstream.name}/… → ${upstream.url.replace(/\/+$/, '')}/…`);
  }
  io.out(`  metrics: ${proxy.url}/metrics`);

  const reason = await untilStopped({ signal: options.signal });
  io.err(`retryq proxy: stopping (${reason})…`);
  await proxy.close();
  io.err('retryq proxy: stopped');
  return ProxyExitCode.ok;
}

interface Flags {
  upstream: string[];
  config: string | undefined;
  host: string | undefined;
  port: string | undefined;
  maxRetries: string | undefined;
  maxRetriesCeiling: string | undefined;
  maxWait: string | undefined;
  attemptTimeout: string | undefined;
  noGate: boolean;
}

function parseFlags(argv: string[]): Flags | 'help' {
  let values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options: {
        upstream: { type: 'string', multiple: true },
        config: { type: 'string' },
        host: { type: 'string' },
        port: { type: 'string' },
        'max-retries': { type: 'string' },
        'max-retries-ceiling': { type: 'string' },
        'max-wait': { type: 'string' },
        'attempt-timeout': { type: 'string' },
        'no-gate': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help === true) return 'help';
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  return {
    upstream: values.upstream ?? [],
    config: values.config,
    host: values.host,
    port: values.port,
    maxRetries: values['max-retries'],
    maxRetriesCeiling: values['max-retries-ceiling'],
    maxWait: values['max-wait'],
    attemptTimeout: values['attempt-timeout'],
    noGate: values['no-gate'] === true,
  };
}

/**
 * Digits only → a number (a count, a port, or ms); otherwise the text as given, which the validator
 * reads as a duration (`15s`) or rejects naming the flag.
 */
function numberOrText(text: string): number | string {
  return /^[0-9]{1,15}$/.test(text) ? Number(text) : text;
}

async function buildOptions(flags: Flags): Promise<{ options: ProxyOptions; fromFlags: Set<string> }> {
  const base = flags.config === undefined ? {} : await readConfigFile(flags.config);
  const fromFlags = new Set<string>();
  const options: Record<string, unknown> = { ...base };
  const set = (key: string, value: unknown): void => {
    if (value === undefined) return;
    options[key] = value;
    fromFlags.add(key);
  };

  if (flags.upstream.length > 0) {
    const upstreams: Record<string, unknown> =
      typeof base['upstreams'] === 'object' && base['upstreams'] !== null
        ? { ...(base['upstreams'] as Record<string, unknown>) }
        : {};
    for (const spec of flags.upstream) {
      const eq = spec.indexOf('=');
      if (eq <= 0 || eq === spec.length - 1) {
        throw new UsageError(
          `--upstream must be NAME=URL, e.g. --upstream acme=https://api.acme.test/v1 (got "${spec}")`,
        );
      }
      upstreams[spec.slice(0, eq)] = spec.slice(eq + 1);
    }
    set('upstreams', upstreams);
  } else if (base['upstreams'] === undefined) {
    throw new UsageError('no upstream given: add --upstream NAME=URL (or "upstreams" in the --config file)');
  }
  set('host', flags.host);
  set('port', flags.port === undefined ? undefined : numberOrText(flags.port));
  set('maxRetries', flags.maxRetries === undefined ? undefined : numberOrText(flags.maxRetries));
  set('maxRetriesCeiling', flags.maxRetriesCeiling === undefined ? undefined : numberOrText(flags.maxRetriesCeiling));
  set('maxWait', flags.maxWait === undefined ? undefined : numberOrText(flags.maxWait));
  set('attemptTimeout', flags.attemptTimeout === undefined ? undefined : numberOrText(flags.attemptTimeout));
  if (flags.noGate) {
    const gate = base['gate'];
    set('gate', typeof gate === 'object' && gate !== null ? { ...gate, enabled: false } : false);
  }
  return { options: options as unknown as ProxyOptions, fromFlags };
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--config ${file}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new UsageError(`--config ${file}: not valid JSON or YAML (${(err as Error).message.split('\n')[0]})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(
      `--config ${file}: must hold an object of proxy options, e.g. { "upstreams": { "acme": "https://…" } }`,
    );
  }
  return value as Record<string, unknown>;
}
