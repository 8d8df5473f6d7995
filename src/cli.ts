#!/usr/bin/env node
/**
 * The `retryq` command.
 *
 * ```
 * retryq dev                       Temporal dev server + UI + workers (npm run dev)
 * retryq worker                    workers only, against the configured Temporal
 * retryq submit --file intent.json submit an intent (or use flags; see `retryq submit --help`)
 * retryq status <key>              an intent's status
 * retryq list [--phase P] [--credential C]
 * retryq cancel <key> [--reason R]
 * retryq retry-now <key>
 * retryq credentials [--json]      per credential: budget split, gate, block, in-flight and waiting intents
 * retryq credentials resume <id>   lift a credential's quota block and wake its waiting intents
 * retryq proxy --upstream NAME=URL  synchronous retrying proxy for idempotent reads
 * retryq sim [--scenario FILE]      the simulated provider
 * retryq webhooks [--port N]        the webhook receiver (POST /webhooks/<source>)
 * retryq doctor                    which Temporal binaries are used, and their versions
 * ```
 * Every command that reads takes `--json`: stdout then holds exactly one JSON document, also when there is nothing
 * to do (`cancel --json` on an intent that already ended prints its phase and exits 5). Exit codes: 0 ok, 1 failure, 2 usage or invalid intent, 3 no such
 * intent, 4 idempotency conflict, 5 the intent has already ended, 6 no live worker serves the credential,
 * 78 configuration error.
 *
 * @example
 * ```sh
 * npx retryq status order-1042-charge --json
 * ```
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { ParseArgsConfig } from 'node:util';
import { RetryqClient, isFinal } from './client.js';
import { loadConfig, resolveSecrets, resolveWebhookSecrets } from './config.js';
import type { RetryqConfig } from './config.js';
import { claimDataDir, startDev } from './dev/session.js';
import { describeWebhookEntry } from './intent.js';
import { untilStopped } from './stop-signals.js';
import type { IntentInput, IntentStatus } from './intent.js';
import { evidenceText } from './policy/index.js';
import { projectRoot, resolveTemporalCli, resolveTestServer } from './temporal/binaries.js';
import type { ServerRestartsExhaustedError } from './errors.js';
import {
  ConfigError,
  CredentialNotFoundError,
  CredentialNotServedError,
  DataDirError,
  DataDirInUseError,
  IdempotencyConflictError,
  IntentAlreadyEndedError,
  IntentNotFoundError,
  IntentValidationError,
  RetryqError,
  UsageError,
} from './errors.js';
import { connectClient, connectWorker } from './temporal/connect.js';
import { translateTemporalError } from './temporal/service-errors.js';
import { installRuntime } from './temporal/runtime.js';
import { assertPortFree, freePort } from './temporal/server-process.js';
import { createWorkers } from './worker.js';
import { runDemo } from './demo/run.js';
import {
  DEMO_API_KEY,
  DEMO_CREDENTIAL,
  DEMO_WEBHOOK_SECRET,
  DEMO_WEBHOOK_SOURCE,
  defaultDemoSize,
  demoCredential,
  demoScenario,
  demoWebhookSource,
} from './demo/scenario.js';
import { runProviderSimCli, startProviderSim } from './sim/index.js';
import { proxyCommand } from './proxy/command.js';
import { webhooksCommand } from './webhooks/command.js';
import { WebhookReceiver } from './webhooks/receiver.js';
import { startWebhookServer } from './webhooks/server.js';
import type { WebhookServer } from './webhooks/server.js';
import { LoadMetrics, serveMetrics } from './load-control/metrics.js';
import {
  credentialLine,
  credentialsReport,
  formatCredentials,
  resumeCredential,
} from './load-control/credentials-report.js';

export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 2,
  notFound: 3,
  conflict: 4,
  alreadyEnded: 5,
  credentialNotServed: 6,
  config: 78,
} as const;

type Out = { out: (s: string) => void; err: (s: string) => void };
const io: Out = { out: (s) => process.stdout.write(s + '\n'), err: (s) => process.stderr.write(s + '\n') };

function parse<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T, positionals = 0) {
  try {
    const r = parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    if (r.positionals.length > positionals)
      throw new UsageError(`unexpected argument: ${r.positionals[positionals] ?? ''}`);
    return r;
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError((err as Error).message);
  }
}

const DEV_HELP = `retryq dev — start Temporal (dev server + Web UI, unless TEMPORAL_ADDRESS is set), the retryq workers and,
unless told otherwise, a simulated provider with a demo batch of intents.
  --no-demo               no simulator, no demo intents
  --demo                  run the demo even against an external Temporal
  --demo-charges N        plain charges in the demo batch (default 18)
  --demo-rate-limit N     the simulated provider's limit per minute (default 20)`;

async function cmdDev(argv: string[], config: RetryqConfig): Promise<number> {
  const { values } = parse(argv, {
    'no-demo': { type: 'boolean' },
    demo: { type: 'boolean' },
    'demo-charges': { type: 'string' },
    'demo-rate-limit': { type: 'string' },
  });
  if (values.help) {
    io.out(DEV_HELP);
    return ExitCode.ok;
  }
  const withDemo = values['no-demo'] ? false : (values.demo ?? !config.temporal.external);
  const size = {
    ...defaultDemoSize,
    ...(values['demo-charges'] ? { charges: positiveInt('--demo-charges', values['demo-charges']) } : {}),
    ...(values['demo-rate-limit']
      ? { rateLimitPerMinute: positiveInt('--demo-rate-limit', values['demo-rate-limit']) }
      : {}),
  };
  const metricsPort = config.metricsPort ?? DEFAULT_METRICS_PORT;
  const sdkMetricsAddress = await sdkMetricsAddressFor(metricsPort);
  const webhookSecrets = new Map<string, readonly string[]>(resolveWebhookSecrets(config.webhooks.sources));
  const webhookSources = [...config.webhooks.sources];
  if (withDemo) {
    webhookSources.push(demoWebhookSource());
    webhookSecrets.set(DEMO_WEBHOOK_SOURCE, [DEMO_WEBHOOK_SECRET]);
  }
  // First the data dir: a second `retryq dev` on it is refused before it takes any port.
  const dataDir = await claimDataDir(config, io.err, sdkMetricsAddress);
  let sim: Awaited<ReturnType<typeof startProviderSim>> | undefined;
  let metrics: Awaited<ReturnType<typeof startMetrics>> | undefined;
  let dev: Awaited<ReturnType<typeof startDev>>;
  const devConfig = withDemo ? { ...config, credentials: [...config.credentials, demoCredential()] } : config;
  try {
    if (config.webhooks.sources.length > 0)
      await assertPortFree(config.webhooks.ip, config.webhooks.port, 'webhook receiver, RETRYQ_WEBHOOK_PORT');
    if (withDemo) {
      await assertPortFree('127.0.0.1', config.dev.simPort, 'simulated provider, RETRYQ_DEV_SIM_PORT');
      sim = await startProviderSim({ port: config.dev.simPort, scenario: demoScenario(size) });
    }
    const secrets = new Map(resolveSecrets(config.credentials));
    if (withDemo) secrets.set(DEMO_CREDENTIAL, DEMO_API_KEY);
    metrics = await startMetrics(metricsPort, sdkMetricsAddress);
    dev = await startDev({ config: devConfig, secrets, log: io.err, metrics: metrics.metrics, dataDir });
  } catch (err) {
    await sim?.close();
    await metrics?.close();
    await dataDir.release();
    throw err;
  }
  // The webhook receiver: on the configured port when sources are configured, else (demo only) on a free port.
  let hooks: WebhookServer | undefined;
  let receiver: WebhookReceiver | undefined;
  if (webhookSources.length > 0) {
    try {
      receiver = new WebhookReceiver({
        client: dev.client,
        sources: webhookSources,
        secrets: webhookSecrets,
        taskQueuePrefix: config.taskQueuePrefix,
        maxBodyBytes: config.webhooks.maxBodyBytes,
        temporalTimeoutMs: config.webhooks.temporalTimeoutMs,
        onError: (message, err) => io.err(`webhooks: ${message}: ${err instanceof Error ? err.message : String(err)}`),
        onIgnored: (line) => io.err(`webhooks: ${line}`),
      });
      hooks = await startWebhookServer({
        receiver,
        host: config.webhooks.ip,
        port: config.webhooks.sources.length > 0 ? config.webhooks.port : 0,
      });
    } catch (err) {
      await dev.stop();
      await sim?.close();
      throw err;
    }
    sim?.updateScenario({ webhookUrl: `${hooks.url}/webhooks/${DEMO_WEBHOOK_SOURCE}` });
  }
  const lines = [
    '',
    'retryq is running.',
    dev.uiUrl ? `  Temporal UI:   ${dev.uiUrl}/namespaces/${config.temporal.namespace}/workflows` : undefined,
    `  Temporal:      ${config.temporal.address} (namespace ${config.temporal.namespace}` +
      `${dev.server ? `, server pid ${dev.server.pid}, supervised` : ''})`,
    `  Task queues:   ${config.taskQueuePrefix}.workflows` +
      (devConfig.credentials.length
        ? `, ${config.taskQueuePrefix}.{actions,inspect}.{${devConfig.credentials.map((c) => c.id).join(',')}}`
        : ''),
    sim ? `  Simulated provider: ${sim.url} (metrics: ${sim.url}/_sim/metrics)` : undefined,
    hooks
      ? `  Webhooks:      ${webhookSources.map((s) => `${hooks.url}/webhooks/${s.name}`).join(', ')} (metrics: ${hooks.url}/metrics)`
      : undefined,
    `  Log:           ${dev.logFile} (workers, SDK${dev.server ? ', Temporal server' : ''})`,
    '  Stop with Ctrl-C (drains the workers, then stops the server).',
    '',
  ];
  io.out(lines.filter((l) => l !== undefined).join('\n'));

  let workerError: unknown;
  const failed = dev.running.then(
    () => 'stopped' as const,
    (err: unknown) => {
      workerError = err;
      return 'failed' as const;
    },
  );
  const stopDemo = new AbortController();
  let demoDone: Promise<void> | undefined;
  if (sim) {
    // This process runs the demo credential's workers itself (they may not have polled yet).
    const rq = new RetryqClient({
      client: dev.client,
      taskQueuePrefix: config.taskQueuePrefix,
      requireServedCredential: false,
    });
    // yymmdd-hhmmss: unique per run, short enough for the summary's lines.
    const runId = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(2, 15);
    demoDone = runDemo({
      rq,
      sim,
      runId,
      size,
      out: (t) => process.stdout.write(t),
      tty: Boolean(process.stdout.isTTY),
      signal: stopDemo.signal,
      ...(receiver ? { webhooks: receiver.metrics } : {}),
      loadControl: async () => {
        const [row] = await credentialsReport({
          client: dev.client,
          prefix: config.taskQueuePrefix,
          credentials: [demoCredential()],
          discover: false,
        });
        return row ? credentialLine(row) : undefined;
      },
    }).then(
      () => {
        if (stopDemo.signal.aborted) return;
        const ui = dev.uiUrl ? `${dev.uiUrl}/namespaces/${config.temporal.namespace}/workflows` : 'the Temporal UI';
        io.out(
          `\nOpen ${ui} to see every intent (filter: WorkflowId STARTS_WITH "intent:demo-${runId}", ` +
            `or RetryPhase="expired"). retryq keeps running until Ctrl-C.`,
        );
      },
      (err: unknown) => io.err(`Demo stopped: ${err instanceof Error ? err.message : String(err)}`),
    );
  }
  let serverGaveUp: ServerRestartsExhaustedError | undefined;
  const gaveUp = dev.serverGaveUp.then((err) => {
    serverGaveUp = err;
    return 'server gave up' as const;
  });
  const first = await Promise.race([
    untilStopped({ exitOnSecondSignal: true }).then(() => 'signal' as const),
    failed,
    gaveUp,
  ]);
  stopDemo.abort();
  io.err(
    first === 'signal'
      ? 'Stopping: draining workers…'
      : first === 'failed'
        ? 'The workers stopped; shutting down…'
        : 'Stopping the workers: the Temporal server is gone…',
  );
  // The demo's last status calls finish while the workers still answer them: a call still out (or retrying) when
  // the connection closes would end the process with the gRPC library's error instead of a clean stop.
  if (demoDone) await Promise.race([demoDone, new Promise((r) => setTimeout(r, 15_000).unref())]);
  await hooks?.close();
  // Without a server the workers cannot finish their tasks: do not wait the whole drain for them.
  await saysWhileSlow(
    serverGaveUp ? Promise.race([dev.stop(), new Promise((r) => setTimeout(r, 10_000))]) : dev.stop(),
  );
  await sim?.close();
  await metrics.close();
  io.err('Stopped.');
  if (serverGaveUp) throw serverGaveUp;
  if (workerError !== undefined) throw workerError instanceof Error ? workerError : new Error('worker failed');
  return ExitCode.ok;
}

/** A drain that takes a while says why and how to cut it short, instead of waiting silently. */
async function saysWhileSlow<T>(drain: Promise<T>, afterMs = 5_000): Promise<T> {
  const timer = setTimeout(
    () =>
      io.err(
        'Still draining: waiting for provider calls in flight to finish (each ends within its attempt timeout). ' +
          'Press Ctrl-C again to stop at once; an intent whose call is cut off is inspected before any resend.',
      ),
    afterMs,
  );
  try {
    return await drain;
  } finally {
    clearTimeout(timer);
  }
}

function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1)
    throw new UsageError({ path: flag, message: 'must be a positive integer', received: value });
  return n;
}

async function cmdWorker(argv: string[], config: RetryqConfig): Promise<number> {
  const { values } = parse(argv, {});
  if (values.help) {
    io.out('retryq worker — run the retryq workers against the configured Temporal (TEMPORAL_ADDRESS …).');
    return ExitCode.ok;
  }
  const metricsPort = config.metricsPort ?? DEFAULT_METRICS_PORT;
  const sdkMetricsAddress = await sdkMetricsAddressFor(metricsPort);
  installRuntime({ level: 'INFO', sdkMetricsAddress });
  const secrets = resolveSecrets(config.credentials);
  const connection = await connectWorker(config.temporal);
  const metrics = await startMetrics(metricsPort, sdkMetricsAddress);
  const workers = await createWorkers({ config, connection, secrets, metrics: metrics.metrics });
  const running = workers.run();
  io.err(
    `retryq workers polling ${config.temporal.address} (namespace ${config.temporal.namespace}); Ctrl-C to drain and stop.`,
  );
  await Promise.race([untilStopped({ exitOnSecondSignal: true }), running]);
  workers.shutdown();
  await saysWhileSlow(running);
  await connection.close();
  await metrics.close();
  return ExitCode.ok;
}

/** The workers' metrics port unless RETRYQ_METRICS_PORT says otherwise (`retryq worker` and `retryq dev`). */
const DEFAULT_METRICS_PORT = 9464;

/**
 * Where the SDK's own Prometheus exporter listens: a free loopback port, read only by retryq's endpoint, which
 * serves it with retryq's metrics on the one documented port. None when the endpoint is off.
 */
async function sdkMetricsAddressFor(port: number): Promise<string | undefined> {
  return port === 0 ? undefined : `127.0.0.1:${await freePort('127.0.0.1')}`;
}

/** The workers' Prometheus endpoint (RETRYQ_METRICS_PORT); a port already in use is reported, not fatal. */
async function startMetrics(
  port: number,
  sdkMetricsAddress: string | undefined,
): Promise<{ metrics: LoadMetrics; close: () => Promise<void> }> {
  const metrics = new LoadMetrics({ processMetrics: true });
  if (port === 0) return { metrics, close: () => Promise.resolve() };
  try {
    const server = await serveMetrics(metrics, port, '0.0.0.0', { sdkMetricsAddress });
    io.err(`Worker metrics (Prometheus): http://localhost:${port}/metrics`);
    return { metrics, close: () => new Promise((resolve) => server.close(() => resolve())) };
  } catch (err) {
    io.err(
      `retryq: no metrics endpoint: port ${port} is not available (${(err as Error).message}); ` +
        'set RETRYQ_METRICS_PORT to a free port, or 0 to turn the endpoint off. The workers run anyway.',
    );
    return { metrics, close: () => Promise.resolve() };
  }
}

async function withClient<T>(config: RetryqConfig, fn: (rq: RetryqClient) => Promise<T>): Promise<T> {
  const { client, close } = await connectClient(config.temporal);
  try {
    return await fn(
      new RetryqClient({
        client,
        taskQueuePrefix: config.taskQueuePrefix,
        defaultDeadlineMs: config.intents.defaultDeadlineMs,
        maxDeadlineMs: config.intents.maxDeadlineMs,
        limits: config.intents.limits,
        stalledDispatchAfterMs: config.intents.stalledDispatchAfterMs,
        knownCredentials: config.credentials.map((c) => c.id),
      }),
    );
  } finally {
    await close();
  }
}

const SUBMIT_HELP = `retryq submit — submit an intent
  --file PATH           the intent as JSON (see the README); flags below override its fields
  --key KEY             idempotency key
  --credential ID       credential id
  --method M --url URL  the action
  --body JSON           JSON body
  --header 'Name: v'    extra header (repeatable)
  --inspect-url URL     inspection URL template with {idempotencyKey}
  --deadline D          ISO time or duration ('2h')
  --max-attempts N
  --no-worker-check     accept a credential no live worker serves yet (workers deployed later)
  --wait                wait for the final outcome
  --json                machine-readable output`;

async function cmdSubmit(argv: string[], config: RetryqConfig): Promise<number> {
  const { values } = parse(argv, {
    file: { type: 'string' },
    key: { type: 'string' },
    credential: { type: 'string' },
    method: { type: 'string' },
    url: { type: 'string' },
    body: { type: 'string' },
    header: { type: 'string', multiple: true },
    'inspect-url': { type: 'string' },
    deadline: { type: 'string' },
    'max-attempts': { type: 'string' },
    'no-worker-check': { type: 'boolean' },
    wait: { type: 'boolean' },
    json: { type: 'boolean' },
  });
  if (values.help) {
    io.out(SUBMIT_HELP);
    return ExitCode.ok;
  }
  let intent: Record<string, unknown> = {};
  if (values.file) {
    try {
      intent = JSON.parse(await readFile(values.file, 'utf8')) as Record<string, unknown>;
    } catch (err) {
      throw new UsageError(`--file ${values.file}: ${(err as Error).message}`);
    }
  }
  const action = { ...((intent['action'] as Record<string, unknown> | undefined) ?? {}) };
  if (values.key) intent['idempotencyKey'] = values.key;
  if (values.credential) intent['credential'] = values.credential;
  if (values.method) action['method'] = values.method;
  if (values.url) action['url'] = values.url;
  if (values.body !== undefined) {
    try {
      action['body'] = JSON.parse(values.body);
    } catch (err) {
      throw new UsageError(`--body must be JSON: ${(err as Error).message}`);
    }
  }
  if (values.header?.length) {
    const headers = { ...((action['headers'] as Record<string, string> | undefined) ?? {}) };
    for (const h of values.header) {
      const i = h.indexOf(':');
      if (i <= 0) throw new UsageError({ path: '--header', message: "must look like 'Name: value'", received: h });
      headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
    }
    action['headers'] = headers;
  }
  intent['action'] = action;
  if (values['inspect-url']) intent['inspection'] = { url: values['inspect-url'] };
  if (values.deadline) intent['deadline'] = values.deadline;
  if (values['max-attempts']) {
    const n = positiveInt('--max-attempts', values['max-attempts']);
    const policy = typeof intent['policy'] === 'object' && intent['policy'] !== null ? intent['policy'] : {};
    intent['policy'] = { ...policy, maxAttempts: n };
  }
  return withClient(config, async (rq) => {
    const submitted = await rq.submit(
      intent as IntentInput,
      values['no-worker-check'] ? { requireServedCredential: false } : {},
    );
    if (!values.wait) {
      if (values.json) io.out(JSON.stringify(submitted));
      else
        io.out(
          `${submitted.attached ? 'Attached to existing' : 'Submitted'} intent ${submitted.key} (workflow ${submitted.workflowId}).` +
            (submitted.heldAtSubmit
              ? ` Held: credential ${(intent as IntentInput).credential} is rate limited until ` +
                `${submitted.heldAtSubmit.until}${submitted.heldAtSubmit.why ? ` (${submitted.heldAtSubmit.why})` : ''}; ` +
                `the server starts it at ${submitted.heldAtSubmit.startsAt}. Nothing is sent before then.`
              : ''),
        );
      return ExitCode.ok;
    }
    const outcome = await rq.result(submitted.key);
    io.out(values.json ? JSON.stringify(outcome, null, 2) : formatStatus(outcome));
    return outcome.phase === 'succeeded' ? ExitCode.ok : ExitCode.failure;
  });
}

/** A status for people. */
export function formatStatus(s: IntentStatus): string {
  const lines = [
    `intent      ${s.idempotencyKey}`,
    `phase       ${s.phase}${s.finalReason ? ` — ${s.finalReason}` : ''}`,
    `credential  ${s.credential}`,
    `attempts    ${s.attempts}/${s.maxAttempts}${s.inspections ? `, inspections ${s.inspections}` : ''}`,
    `deadline    ${s.deadline}`,
  ];
  if (s.nextAttemptAt) lines.push(`next        ${s.nextAttemptAt}`);
  if (s.permittedAt) lines.push(`permitted   ${s.permittedAt} (server)`);
  if (s.lastEvidence) {
    const e = s.lastEvidence;
    lines.push(`last        ${evidenceText(e)} → ${e.decision}${e.retryAfter ? ` (Retry-After ${e.retryAfter})` : ''}`);
  }
  if (s.reservation) lines.push(`reservation ${s.reservation.reason}`);
  if (s.cancelRequested) lines.push(`cancelled   ${s.cancelRequested}`);
  if (s.attemptLog.length) {
    lines.push('log:');
    for (const a of s.attemptLog) {
      const e = a.evidence;
      if (a.kind === 'webhook' && a.webhook) {
        const ignored = e.decision.endsWith('_ignored') ? ' (ignored: the intent was already settled)' : '';
        lines.push(`  ${a.startedAt}  ${describeWebhookEntry(a.webhook)} (from ${a.webhook.source})${ignored}`);
        continue;
      }
      lines.push(
        `  ${a.startedAt}  ${a.kind === 'dispatch' ? `attempt ${a.attempt}` : `inspect ${a.attempt}`}  ` +
          `${evidenceText(e)} → ${e.decision}` +
          (a.nextAt ? `, next ${a.nextAt} (${a.floor})` : ''),
      );
    }
  }
  return lines.join('\n');
}

async function cmdStatus(argv: string[], config: RetryqConfig): Promise<number> {
  const { values, positionals } = parse(argv, { json: { type: 'boolean' } }, 1);
  if (values.help || !positionals[0]) {
    if (!values.help) throw new UsageError('status needs an idempotency key: retryq status <key>');
    io.out('retryq status <key> [--json]');
    return ExitCode.ok;
  }
  const key = positionals[0];
  return withClient(config, async (rq) => {
    const s = await rq.status(key);
    io.out(values.json ? JSON.stringify(s, null, 2) : formatStatus(s));
    return ExitCode.ok;
  });
}

async function cmdList(argv: string[], config: RetryqConfig): Promise<number> {
  const { values } = parse(argv, {
    phase: { type: 'string' },
    credential: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (values.help) {
    io.out('retryq list [--phase waiting] [--credential acme-prod] [--limit 100] [--json]');
    return ExitCode.ok;
  }
  const limit = values.limit === undefined ? 100 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1)
    throw new UsageError({ path: '--limit', message: 'must be a positive integer', received: values.limit });
  return withClient(config, async (rq) => {
    const rows = await rq.list({
      ...(values.phase ? { phase: values.phase } : {}),
      ...(values.credential ? { credential: values.credential } : {}),
      limit,
    });
    if (values.json) io.out(JSON.stringify(rows, null, 2));
    else {
      io.out(['KEY', 'PHASE', 'ATTEMPTS', 'CREDENTIAL', 'STARTED'].join('\t'));
      for (const r of rows)
        io.out(
          [r.key, r.phase ?? '?', String(r.attempts ?? '?'), r.credential ?? '?', r.startTime.toISOString()].join('\t'),
        );
    }
    return ExitCode.ok;
  });
}

async function cmdCancel(argv: string[], config: RetryqConfig): Promise<number> {
  const { values, positionals } = parse(argv, { reason: { type: 'string' }, json: { type: 'boolean' } }, 1);
  if (values.help || !positionals[0]) {
    if (!values.help) throw new UsageError('cancel needs an idempotency key: retryq cancel <key> [--reason R]');
    io.out('retryq cancel <key> [--reason R]');
    return ExitCode.ok;
  }
  const key = positionals[0];
  return withClient(config, async (rq) => {
    try {
      await rq.cancel(key, values.reason ?? 'cancelled from the retryq CLI');
    } catch (err) {
      if (!(values.json && err instanceof IntentAlreadyEndedError)) throw err;
      // Nothing to do is still an answer: one JSON document, and the exit code that says it had ended.
      const ended = await rq.status(key).catch(() => undefined);
      io.out(
        JSON.stringify({
          key,
          cancelRequested: false,
          alreadyEnded: true,
          phase: ended?.phase ?? err.phase ?? null,
          reservation: ended?.reservation ?? null,
        }),
      );
      return ExitCode.alreadyEnded;
    }
    // A dispatch not yet sent ends at once; an attempt in flight is aborted within about a heartbeat (an inspection
    // finishes first). Say how it ended, briefly.
    let s = await rq.status(key);
    for (let i = 0; i < 20 && !isFinal(s.phase); i++) {
      await new Promise((r) => setTimeout(r, 100));
      s = await rq.status(key);
    }
    if (values.json)
      io.out(JSON.stringify({ key, cancelRequested: true, phase: s.phase, reservation: s.reservation ?? null }));
    else if (isFinal(s.phase))
      io.out(
        `Intent ${key} is ${s.phase}${s.finalReason ? `: ${s.finalReason}` : ''}.` +
          (s.reservation ? ` Reservation to reconcile: ${s.reservation.reason}.` : ' Nothing is left to reconcile.'),
      );
    else
      io.out(
        `Cancel requested for ${key}; it is still ${s.phase}: the call in flight is aborted (an inspection ` +
          `finishes first), then it ends as cancelled; \`retryq status ${key}\` shows any reservation.`,
      );
    return ExitCode.ok;
  });
}

async function cmdRetryNow(argv: string[], config: RetryqConfig): Promise<number> {
  const { values, positionals } = parse(argv, { json: { type: 'boolean' } }, 1);
  if (values.help || !positionals[0]) {
    if (!values.help) throw new UsageError('retry-now needs an idempotency key');
    io.out('retryq retry-now <key> — end the current wait; never earlier than the server permits');
    return ExitCode.ok;
  }
  const key = positionals[0];
  return withClient(config, async (rq) => {
    let report: Awaited<ReturnType<typeof rq.retryNow>>;
    try {
      report = await rq.retryNow(key);
    } catch (err) {
      if (!(values.json && err instanceof IntentAlreadyEndedError)) throw err;
      io.out(JSON.stringify({ key, alreadyEnded: true, phase: err.phase ?? null, message: err.message }));
      return ExitCode.alreadyEnded;
    }
    io.out(values.json ? JSON.stringify(report) : `${key}: ${report.message}`);
    return ExitCode.ok;
  });
}

const CREDENTIALS_HELP = `retryq credentials [--json]       each credential configured here or that workers have called with:
                                  whether live workers serve it, its budget split, gate (rate limited until when,
                                  and why), block, in-flight and waiting intents
retryq credentials resume <id>    lift the block a quota or spending-limit answer set on a credential (do this once
                                  the limit is raised or the period renewed); its waiting intents are woken at once`;

async function cmdCredentials(argv: string[], config: RetryqConfig): Promise<number> {
  const { values, positionals } = parse(argv, { json: { type: 'boolean' } }, 2);
  if (values.help) {
    io.out(CREDENTIALS_HELP);
    return ExitCode.ok;
  }
  const [sub, id] = positionals;
  if (sub !== undefined && sub !== 'resume')
    throw new UsageError(
      `unknown credentials command "${sub}"; use \`retryq credentials\` or \`retryq credentials resume <id>\``,
    );
  if (sub === 'resume') {
    if (!id) throw new UsageError('credentials resume needs a credential id: retryq credentials resume <id>');
    return withClient(config, async (rq) => {
      try {
        const r = await resumeCredential({ client: rq.client, prefix: config.taskQueuePrefix, credential: id });
        if (values.json) io.out(JSON.stringify({ credential: id, ...r }));
        else
          io.out(
            r.wasBlocked
              ? `Credential ${id} resumed (it was blocked since ${r.wasBlocked.since}: ${r.wasBlocked.reason}); woke ${r.woken} waiting intent${r.woken === 1 ? '' : 's'}.`
              : `Credential ${id} was not blocked; woke ${r.woken} waiting intent${r.woken === 1 ? '' : 's'} anyway.`,
          );
        return ExitCode.ok;
      } catch (err) {
        if (err instanceof CredentialNotFoundError) {
          io.err(`retryq: ${err.message}`);
          return ExitCode.notFound;
        }
        throw err;
      }
    });
  }
  return withClient(config, async (rq) => {
    const rows = await credentialsReport({
      client: rq.client,
      prefix: config.taskQueuePrefix,
      credentials: config.credentials,
    });
    io.out(values.json ? JSON.stringify(rows, null, 2) : formatCredentials(rows));
    return ExitCode.ok;
  });
}

async function cmdDoctor(argv: string[]): Promise<number> {
  const { values } = parse(argv, { json: { type: 'boolean' } });
  const cli = await resolveTemporalCli({ log: io.err });
  const ts = await resolveTestServer({ log: io.err });
  const report = { temporalCli: cli, testServer: ts, node: process.version };
  if (values.json) io.out(JSON.stringify(report, null, 2));
  else {
    io.out(`temporal CLI          ${cli.version}  (${cli.source}: ${cli.path ?? 'SDK download'})`);
    io.out(`time-skipping server  ${ts.version}  (${ts.source}: ${ts.path ?? 'SDK download'})`);
    io.out(`node                  ${process.version}`);
  }
  return ExitCode.ok;
}

const COMMANDS: Record<string, (argv: string[], config: RetryqConfig) => Promise<number>> = {
  dev: cmdDev,
  worker: cmdWorker,
  submit: cmdSubmit,
  status: cmdStatus,
  list: cmdList,
  cancel: cmdCancel,
  'retry-now': cmdRetryNow,
  credentials: cmdCredentials,
  webhooks: (argv, config) =>
    webhooksCommand(argv, config, { out: io.out, err: io.err, untilSignal: () => untilStopped() }),
};

const HELP = `retryq — a durable retry queue for outbound API actions, on Temporal

Commands:
  dev          start Temporal (dev server + Web UI) and the workers
  worker       run the workers against the configured Temporal
  submit       submit an intent
  status KEY   an intent's status
  list         list intents (--phase, --credential)
  cancel KEY   stop further dispatch (--reason)
  retry-now KEY  end the current wait early (never before the server permits)
  credentials  load control per credential (budget, gate, block); \`credentials resume ID\` lifts a block
  proxy        synchronous retrying proxy for idempotent reads (see \`retryq proxy --help\`)
  sim          the simulated provider (see \`retryq sim --help\`)
  webhooks     the webhook receiver (see \`retryq webhooks --help\`)
  doctor       show the Temporal binaries in use
  version      the installed retryq version (also --version)

Configuration comes from the environment; see the README.`;

/** Runs the CLI; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (!command || command === 'help' || command === '--help' || command === '-h') {
      io.out(HELP);
      return command ? ExitCode.ok : ExitCode.usage;
    }
    if (command === 'version' || command === '--version' || command === '-v') {
      const pkg = JSON.parse(await readFile(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string };
      io.out(pkg.version);
      return ExitCode.ok;
    }
    if (command === 'doctor') return await cmdDoctor(rest);
    if (command === 'proxy') return await proxyCommand(rest, io);
    if (command === 'sim') return await runProviderSimCli(rest, { stdout: io.out, stderr: io.err });
    const run = COMMANDS[command];
    if (!run) throw new UsageError(`unknown command "${command}"; run \`retryq help\``);
    return await run(rest, loadConfig());
  } catch (err) {
    // Temporal's refusals in retryq's words (with the server's own message), never a bare gRPC error.
    const known = translateTemporalError(err, `run \`retryq ${command}\``);
    if (!(known instanceof RetryqError)) {
      // Not one of retryq's own errors: the message, and the stack only when asked for (never a bare stack trace).
      const message = known instanceof Error ? known.message : String(known);
      const stack = known instanceof Error ? (known.stack ?? '') : '';
      io.err(
        `retryq: ${command} failed unexpectedly: ${message}\n` +
          (process.env['RETRYQ_DEBUG']
            ? stack
            : 'This looks like a bug in retryq: run again with RETRYQ_DEBUG=1 for the stack trace and report it.'),
      );
      return ExitCode.failure;
    }
    // Problem lists start with their own heading; single-sentence errors get the command's name.
    io.err(
      known instanceof ConfigError || known instanceof IntentValidationError
        ? known.message
        : `retryq: ${known.message}`,
    );
    return exitCodeOf(known);
  }
}

/** The exit code of each error a user can reach. */
function exitCodeOf(err: RetryqError): number {
  if (err instanceof UsageError || err instanceof IntentValidationError) return ExitCode.usage;
  if (err instanceof ConfigError || err instanceof DataDirError || err instanceof DataDirInUseError)
    return ExitCode.config;
  if (err instanceof IntentAlreadyEndedError) return ExitCode.alreadyEnded;
  if (err instanceof IntentNotFoundError) return ExitCode.notFound;
  if (err instanceof IdempotencyConflictError) return ExitCode.conflict;
  if (err instanceof CredentialNotServedError) return ExitCode.credentialNotServed;
  return ExitCode.failure;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('/src/cli.ts')) {
  void main(process.argv.slice(2)).then((code) => process.exit(code));
}
