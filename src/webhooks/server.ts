/**
 * The receiver as its own HTTP server (what `retryq webhooks` and `retryq dev` run): `POST /webhooks/<source>`,
 * `GET /metrics` (Prometheus) and `GET /healthz`.
 *
 * @example
 * ```ts
 * import { startWebhookServer } from './server.js';
 * const server = await startWebhookServer({ receiver, host: '127.0.0.1', port: 8788 });
 * console.log(server.url); // http://127.0.0.1:8788
 * await server.close();
 * ```
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WebhookReceiver } from './receiver.js';

export interface WebhookServerOptions {
  receiver: WebhookReceiver;
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 0 (a free port) */
  port?: number;
}

export interface WebhookServer {
  /** `http://host:port`; deliveries go to `${url}/webhooks/<source>`. */
  readonly url: string;
  readonly port: number;
  /** Stops accepting, lets requests in flight finish (at most 5 s), then closes every connection. */
  close(): Promise<void>;
}

/** Starts listening; rejects (e.g. EADDRINUSE) when the port cannot be bound. */
export async function startWebhookServer(options: WebhookServerOptions): Promise<WebhookServer> {
  const { receiver } = options;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      void receiver.metrics.render().then(
        (text) => res.writeHead(200, { 'content-type': receiver.metrics.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      return;
    }
    void receiver.handle(req, res);
  });
  // A slow sender cannot hold a connection forever.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shown}:${port}`,
    port,
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), 5000);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      })),
  };
}
