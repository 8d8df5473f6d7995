/**
 * A provider that takes every request and never answers: real HTTP on port 0. `arrived` resolves with the first
 * request, `closed` when that request's connection closes (the client aborted it). For tests of cancellation in
 * flight.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SilentProvider {
  server: Server;
  url: string;
  arrived: Promise<IncomingMessage>;
  closed: Promise<void>;
}

export async function silentProvider(): Promise<SilentProvider> {
  let arrive!: (req: IncomingMessage) => void;
  let close!: () => void;
  const arrived = new Promise<IncomingMessage>((r) => (arrive = r));
  const closed = new Promise<void>((r) => (close = r));
  const server = createServer((req) => {
    req.resume();
    req.socket.once('close', close);
    arrive(req);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrived, closed };
}

/** Closes a test server and every connection still open on it. */
export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}
