/**
 * The simulator's own endpoints under `/_sim/`: metrics, recorded operations, the scenario (read,
 * replace, patch), reset and outages. Served only while the scenario's `admin` is on.
 */
import YAML from 'yaml';
import { isScenarioError } from './scenario.js';
import type { Scenario, ScenarioInput, ScenarioPatch } from './scenario.js';
import type { Exchange } from './exchange.js';
import { readBody } from './exchange.js';
import type { OperationRecord } from './operation-store.js';
import { errorAnswer, ProviderErrorCode } from './provider-errors.js';
import type { ProviderState, SimMetrics } from './state.js';

/** What the admin endpoints drive: the simulator's own methods. */
export interface AdminTarget {
  metrics(): SimMetrics;
  setScenario(scenario: ScenarioInput): void;
  updateScenario(patch: ScenarioPatch): void;
  reset(): void;
  outage(durationMs: number): Promise<{ resumed: Promise<void> }>;
}

const routes: Readonly<Record<string, readonly string[]>> = {
  '/_sim/metrics': ['GET'],
  '/_sim/operations': ['GET'],
  '/_sim/scenario': ['GET', 'PUT', 'PATCH'],
  '/_sim/reset': ['POST'],
  '/_sim/outage': ['POST'],
};

/** The 404 of a path the simulator does not serve. */
export function noRoute(exchange: Exchange) {
  return errorAnswer(ProviderErrorCode.notFound, `No route for ${exchange.method} ${exchange.path}.`);
}

/** Answers a `/_sim/…` request. */
export async function handleAdmin(
  sim: AdminTarget,
  state: ProviderState,
  exchange: Exchange,
  url: URL,
  onError: (error: unknown) => void,
): Promise<void> {
  if (!state.scenario.admin) return state.send(exchange, noRoute(exchange));
  const { method, path } = exchange;
  const allowed = routes[path];
  if (!allowed) return state.send(exchange, noRoute(exchange));
  if (!allowed.includes(method)) {
    return state.send(
      exchange,
      errorAnswer(ProviderErrorCode.methodNotAllowed, `Use ${allowed.join(' or ')} for ${path}.`, {
        Allow: allowed.join(', '),
      }),
    );
  }
  if (method === 'GET') {
    if (path === '/_sim/metrics') state.send(exchange, { status: 200, body: sim.metrics() });
    else if (path === '/_sim/scenario') state.send(exchange, { status: 200, body: state.scenario });
    else state.send(exchange, { status: 200, body: listOperations(state, url) });
    return;
  }
  if (path === '/_sim/reset') {
    sim.reset();
    return state.send(exchange, { status: 200, body: { reset: true } });
  }
  const text = await readBody(exchange.req);
  if (text === null) return state.send(exchange, errorAnswer(ProviderErrorCode.requestTooLarge, 'Body too large.'));
  let data: unknown;
  try {
    const yaml = /yaml/i.test(exchange.req.headers['content-type'] ?? '');
    data = text.trim() === '' ? {} : yaml ? YAML.parse(text) : JSON.parse(text);
  } catch {
    return state.send(
      exchange,
      errorAnswer(
        ProviderErrorCode.invalidJson,
        'The request body is not valid JSON (or YAML with a yaml content type).',
      ),
    );
  }
  if (path === '/_sim/outage') {
    const durationMs = (data as { durationMs?: unknown } | null)?.durationMs;
    if (typeof durationMs !== 'number' || !Number.isFinite(durationMs) || durationMs < 0)
      return state.send(
        exchange,
        errorAnswer(ProviderErrorCode.invalidRequest, 'Expected {"durationMs": <number ≥ 0>}.'),
      );
    exchange.res.once('finish', () => {
      setImmediate(() => {
        sim.outage(durationMs).catch(onError);
      });
    });
    return state.send(exchange, { status: 202, body: { outage: { durationMs } } });
  }
  try {
    if (method === 'PUT') sim.setScenario(data as ScenarioInput);
    else sim.updateScenario(data as ScenarioPatch);
  } catch (error) {
    if (!isScenarioError(error)) throw error;
    return state.send(
      exchange,
      errorAnswer(ProviderErrorCode.invalidScenario, error.message, undefined, { problems: error.problems }),
    );
  }
  state.send(exchange, { status: 200, body: state.scenario satisfies Scenario });
}

function listOperations(state: ProviderState, url: URL): { operations: OperationRecord[] } {
  const idempotencyKey = url.searchParams.get('idempotencyKey') ?? undefined;
  const limit = Math.min(10_000, Math.max(1, Number(url.searchParams.get('limit') ?? 1_000) || 1_000));
  const all = state.store.list(idempotencyKey === undefined ? {} : { idempotencyKey });
  return { operations: all.slice(-limit) };
}
