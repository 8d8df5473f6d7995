/**
 * The provider's API under `/v1/`: authenticate the key (`Authorization: Bearer <key>`), refuse a
 * denied key, then route the status endpoint (`GET /v1/operations/{idempotencyKey}`) and writes
 * (POST, PUT, PATCH, DELETE on any other path). See docs/provider-sim.md for the HTTP contract.
 */
import { noRoute } from './admin.js';
import type { Exchange } from './exchange.js';
import { handleInspection, handleWrite } from './operations.js';
import { errorAnswer, ProviderErrorCode } from './provider-errors.js';
import { writeMethods } from './scenario.js';
import type { ProviderState } from './state.js';

const writeMethodSet: ReadonlySet<string> = new Set(writeMethods);
const inspectPrefix = '/v1/operations/';

/** Answers a request whose path starts with `/v1/` (anything else under `/` is a 404). */
export async function handleApi(state: ProviderState, exchange: Exchange): Promise<void> {
  const { method, path } = exchange;
  if (!path.startsWith('/v1/') || path === '/v1/') return state.send(exchange, noRoute(exchange));
  exchange.counted = true;
  const key = state.authenticate(exchange.req);
  state.metrics.request(key?.id, state.now());
  if (!key) {
    return state.send(
      exchange,
      errorAnswer(ProviderErrorCode.invalidApiKey, 'Missing or unknown API key; send Authorization: Bearer <key>.'),
    );
  }
  exchange.keyId = key.id;
  if (key.permission === 'denied') {
    return state.send(
      exchange,
      errorAnswer(ProviderErrorCode.permissionDenied, 'This API key is not permitted to perform this request.'),
    );
  }
  if (method === 'GET' && path.startsWith(inspectPrefix) && path.length > inspectPrefix.length)
    return handleInspection(state, exchange, key, path.slice(inspectPrefix.length));
  if (writeMethodSet.has(method)) return handleWrite(state, exchange, key);
  if (method === 'GET') return state.send(exchange, noRoute(exchange));
  state.send(
    exchange,
    errorAnswer(ProviderErrorCode.methodNotAllowed, `Method ${method} is not allowed here.`, {
      Allow: 'GET, POST, PUT, PATCH, DELETE',
    }),
  );
}
