/**
 * The upstream of `npm run bench:proxy`, in its own process. Prints `listening PORT`, then serves:
 *
 * - `GET /fast…`: 200 with a small JSON body, at once (the throughput scenario).
 * - `GET /limited…`: a fixed-window rate limit of `limit` requests per `windowMs` (default 20 per 2 s,
 *   i.e. 600/min scaled down to short windows); past it, 429 with `Retry-After` = the seconds left in
 *   the window, rounded up.
 * - `POST /__reset?windowMs=…&limit=…`: restarts the window and zeroes the counts.
 * - `GET /__stats`: `{ requests, ok, limited }` of `/limited` since the last reset.
 *
 * @example
 * ```sh
 * node --import tsx bench/proxy-upstream.ts   # → listening 41234
 * ```
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const fastBody = JSON.stringify({ id: 42, name: 'fast upstream', tags: ['a', 'b', 'c'], ok: true });
const fastHeaders = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(fastBody)) };

let windowMs = 2_000;
let limit = 20;
let windowStart = Date.now();
let used = 0;
let stats = { requests: 0, ok: 0, limited: 0 };

const server = createServer((req, res) => {
  const url = req.url ?? '/';
  if (url.startsWith('/fast')) {
    res.writeHead(200, fastHeaders);
    res.end(fastBody);
    return;
  }
  if (url.startsWith('/limited')) {
    stats.requests += 1;
    const now = Date.now();
    if (now - windowStart >= windowMs) {
      windowStart += Math.floor((now - windowStart) / windowMs) * windowMs;
      used = 0;
    }
    if (used < limit) {
      used += 1;
      stats.ok += 1;
      res.writeHead(200, fastHeaders);
      res.end(fastBody);
    } else {
      stats.limited += 1;
      const retryAfter = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
      const body = '{"error":{"code":"rate_limit_exceeded"}}';
      res.writeHead(429, { 'retry-after': String(retryAfter), 'content-type': 'application/json' });
      res.end(body);
    }
    return;
  }
  if (url.startsWith('/__reset')) {
    const q = new URL(url, 'http://x').searchParams;
    windowMs = Number(q.get('windowMs') ?? windowMs);
    limit = Number(q.get('limit') ?? limit);
    windowStart = Date.now();
    used = 0;
    stats = { requests: 0, ok: 0, limited: 0 };
    res.writeHead(204).end();
    return;
  }
  if (url.startsWith('/__stats')) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
    return;
  }
  res.writeHead(404).end();
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
