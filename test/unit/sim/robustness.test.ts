import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { useSimHarness } from './sim-harness.js';

const { start, call } = useSimHarness();

describe('bad input', () => {
  it('answers 400 invalid_json to an operation whose body is not JSON, and executes nothing', async () => {
    const sim = await start();
    const res = await call(sim, { rawBody: 'amount=5', idempotencyKey: 'k' });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_json' });
    expect(sim.sideEffects('k')).toBe(0);
  });

  it('treats an empty body as null and executes the operation', async () => {
    const sim = await start();
    const res = await call(sim, { method: 'DELETE', path: '/v1/charges/1', rawBody: '' });
    expect(res.status).toBe(200);
    expect(sim.operations()[0]?.request).toBeNull();
  });

  it('answers 413 request_too_large to a body over 1 MiB', async () => {
    const sim = await start();
    const res = await call(sim, { rawBody: JSON.stringify({ blob: 'x'.repeat(1024 * 1024) }) });
    expect(res.status).toBe(413);
    expect(res.json.error?.code).toBe('request_too_large');
    expect(sim.operations()).toHaveLength(0);
    expect((await call(sim)).status).toBe(201);
  });

  it('answers 404 not_found outside /v1 and for unknown reads, and 405 for other methods', async () => {
    const sim = await start();
    expect((await call(sim, { method: 'GET', path: '/', key: null })).status).toBe(404);
    expect((await call(sim, { method: 'GET', path: '/v1/charges' })).json.error?.code).toBe('not_found');
    const options = await call(sim, { method: 'OPTIONS', path: '/v1/charges' });
    expect(options.status).toBe(405);
    expect(options.headers['allow']).toContain('POST');
  });

  it('answers malformed HTTP with 400 and keeps serving', async () => {
    const sim = await start();
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(sim.port, '127.0.0.1', () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      let data = '';
      socket.on('data', (chunk: Buffer) => (data += chunk.toString('utf8')));
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expect((await call(sim)).status).toBe(201);
  });

  it('survives a client that disconnects halfway through a body', async () => {
    const sim = await start();
    await new Promise<void>((resolve, reject) => {
      const socket = connect(sim.port, '127.0.0.1', () => {
        // Gone as soon as the half body is handed to the network.
        socket.write(
          'POST /v1/charges HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk_test_acme\r\nContent-Length: 100\r\n\r\n{"a":',
          () => {
            socket.destroy();
            resolve();
          },
        );
      });
      socket.on('error', reject);
    });
    expect((await call(sim)).status).toBe(201);
    expect(sim.operations()).toHaveLength(1);
  });
});

describe('bounded memory', () => {
  it('keeps at most maxOperations operations, forgetting the oldest', async () => {
    const sim = await start({ scenario: { maxOperations: 3 } });
    for (let i = 0; i < 6; i++) await call(sim, { idempotencyKey: `k${i}` });
    expect(sim.operations().map((o) => o.idempotencyKey)).toEqual(['k3', 'k4', 'k5']);
    expect(sim.metrics().operations).toEqual({ stored: 3, pending: 0, evicted: 3 });
    expect(sim.metrics().totals.sideEffects).toBe(6);
  });
});
