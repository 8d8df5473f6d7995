/**
 * One request/response pair of the simulated provider and the ways to end it: a JSON answer (with
 * the server's `Date` and a `Request-Id`), a held socket that never answers, or a reset connection.
 * Also reads request bodies with a size limit.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { formatImfFixdate } from './http-date.js';
import type { MetricsRecorder } from './metrics.js';

/** A JSON answer about to be sent. */
export interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Server-clock time for the `Date` header when it must agree with another header. */
  serverNowMs?: number;
}

/** One request/response pair in flight. */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  method: string;
  path: string;
  /** The authenticated key's id, for per-key metrics; undefined before/without auth. */
  keyId: string | undefined;
  /** Whether this is a `/v1` request (counted in metrics). */
  counted: boolean;
  /** Headers every answer to this request carries (the rate-limit headers of an admitted write). */
  headers?: Record<string, string> | undefined;
}

/** Largest request body the simulator reads. */
export const maxBodyBytes = 1024 * 1024;

/** `prefix_` and 24 random hex digits: request, operation and delivery ids. */
export function randomId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

/** A fresh exchange for a request that just arrived. */
export function newExchange(req: IncomingMessage, res: ServerResponse): Exchange {
  return {
    req,
    res,
    requestId: randomId('req'),
    method: req.method ?? 'GET',
    path: '/',
    keyId: undefined,
    counted: false,
  };
}

/**
 * Sends `answer` as JSON (once; later calls do nothing), dated `serverNowMs` unless the answer says otherwise.
 * Returns whether this call sent it.
 */
export function send(exchange: Exchange, answer: Answer, serverNowMs: number, metrics: MetricsRecorder): boolean {
  const { res } = exchange;
  if (res.headersSent || res.destroyed || res.writableEnded) return false;
  const payload = JSON.stringify(answer.body) ?? 'null';
  res.sendDate = false;
  res.statusCode = answer.status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Date', formatImfFixdate(answer.serverNowMs ?? serverNowMs));
  res.setHeader('Request-Id', exchange.requestId);
  for (const [name, value] of Object.entries({ ...exchange.headers, ...answer.headers })) res.setHeader(name, value);
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  res.end(payload);
  if (exchange.counted) metrics.answer(exchange.keyId, answer.status);
  return true;
}

/** Deliberately never answers: the socket stays open until the client gives up or the simulator closes. */
export function hold(exchange: Exchange, metrics: MetricsRecorder): void {
  metrics.event(exchange.keyId, 'held');
}

/** Destroys the connection without an answer. */
export function resetSocket(exchange: Exchange, metrics: MetricsRecorder): void {
  metrics.event(exchange.keyId, 'reset');
  exchange.req.socket.destroy();
}

/** The message a request body read rejects with when the client breaks the request off. */
export const clientAborted = 'request aborted by the client';

/**
 * Reads a request body up to `limit` bytes; `null` if it is larger. An oversize body is drained
 * (discarded) to its end, up to `drainLimit` bytes in all, so the client can read the 413 answer
 * instead of failing on a write; beyond that the answer goes out at once.
 */
export function readBody(req: IncomingMessage, limit = maxBodyBytes, drainLimit = 16 * limit): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let overflow = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (overflow) {
        if (size > drainLimit) resolve(null);
        return;
      }
      if (size > limit) {
        overflow = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(overflow ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) reject(new Error(clientAborted));
    });
  });
}
