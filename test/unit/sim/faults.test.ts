import { describe, expect, it } from 'vitest';
import { formatAsctimeDate, formatImfFixdate, formatRfc850Date } from '../../../src/sim/index.js';
import type { ScenarioInput } from '../../../src/sim/index.js';
import { FakeClock, failureCode, useSimHarness, waitFor } from './sim-harness.js';

const { start, call } = useSimHarness();

const oneRule = (rule: NonNullable<ScenarioInput['rules']>[number]): ScenarioInput => ({ rules: [rule] });

describe('scripted error steps', () => {
  it('answer the scripted status with a default code and type, and execute nothing', async () => {
    const sim = await start({ scenario: oneRule({ match: { idempotencyKey: 'k' }, steps: [{ status: 503 }] }) });
    const res = await call(sim, { idempotencyKey: 'k' });
    expect(res.status).toBe(503);
    expect(res.json.error).toMatchObject({ type: 'api_error', code: 'service_unavailable' });
    expect(res.headers['retry-after']).toBeUndefined();
    expect(sim.sideEffects('k')).toBe(0);
  });

  it('send the scripted code, message, headers and a replacement body', async () => {
    const sim = await start({
      scenario: {
        rules: [
          {
            match: { idempotencyKeyPrefix: 'a' },
            steps: [{ status: 409, code: 'conflict_x', message: 'm', headers: { 'X-Why': 'test' } }],
          },
          { match: { idempotencyKeyPrefix: 'b' }, steps: [{ status: 500, body: { oops: true } }] },
        ],
      },
    });
    const a = await call(sim, { idempotencyKey: 'a1' });
    expect(a.json.error).toEqual({ type: 'invalid_request_error', code: 'conflict_x', message: 'm' });
    expect(a.headers['x-why']).toBe('test');
    const b = await call(sim, { idempotencyKey: 'b1' });
    expect(b.status).toBe(500);
    expect(b.json).toEqual({ oops: true });
  });

  it('render every Retry-After form: seconds, relative HTTP-dates in three styles, past dates and raw strings', async () => {
    const clock = new FakeClock();
    const skew = -42_000;
    const server = clock.t + skew;
    const cases: Array<[unknown, string]> = [
      [120, '120'],
      ['120', '120'],
      ['http-date:+120s', formatImfFixdate(server + 120_000)],
      ['http-date:-30s', formatImfFixdate(server - 30_000)],
      ['http-date:+2m', formatImfFixdate(server + 120_000)],
      [{ httpDate: 'rfc850', inSeconds: 120 }, formatRfc850Date(server + 120_000)],
      [{ httpDate: 'asctime', inSeconds: 5 }, formatAsctimeDate(server + 5_000)],
      [{ httpDate: 'imf', inSeconds: 0 }, formatImfFixdate(server)],
      ['soon-ish', 'soon-ish'],
      [-5, '-5'],
      ['Wed, 21 Oct 2015 07:28:00 GMT', 'Wed, 21 Oct 2015 07:28:00 GMT'],
    ];
    const sim = await start({
      now: clock.now,
      scenario: {
        clockOffsetMs: skew,
        rules: cases.map(([retryAfter], i) => ({
          match: { idempotencyKey: `case-${i}` },
          steps: [{ status: 429, retryAfter } as { status: number; retryAfter: string }],
        })),
      },
    });
    for (const [i, [, expected]] of cases.entries()) {
      const res = await call(sim, { idempotencyKey: `case-${i}` });
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toBe(expected);
      expect(res.headers['date']).toBe(formatImfFixdate(server));
    }
  });

  it('answer permission and schema errors only for the chosen API key', async () => {
    const sim = await start({
      scenario: {
        keys: [
          { key: 'sk_test_acme' },
          { key: 'sk_test_limited', id: 'limited' },
          { key: 'sk_test_strict', id: 'strict' },
        ],
        rules: [
          { match: { apiKey: 'limited' }, steps: [{ status: 403, code: 'permission_denied' }] },
          { match: { apiKey: 'sk_test_strict', pathPrefix: '/v1/charges' }, steps: [{ status: 422 }] },
          { match: { apiKey: 'sk_test_strict', pathPrefix: '/v1/refunds' }, steps: [{ status: 400 }] },
        ],
      },
    });
    const denied = await call(sim, { key: 'sk_test_limited' });
    expect(denied.status).toBe(403);
    expect(denied.json.error).toMatchObject({ type: 'permission_error', code: 'permission_denied' });
    expect((await call(sim, { key: 'sk_test_strict' })).json.error?.code).toBe('validation_failed');
    expect((await call(sim, { key: 'sk_test_strict', path: '/v1/refunds' })).json.error?.code).toBe('invalid_request');
    expect((await call(sim, { key: 'sk_test_strict', path: '/v1/other' })).status).toBe(201);
    expect((await call(sim)).status).toBe(201);
  });
});

describe('rule sequences', () => {
  it('hand out one step per matching request, per idempotency key, and repeat the last step', async () => {
    const sim = await start({
      scenario: oneRule({
        match: { idempotencyKey: 'rl-*' },
        steps: [{ status: 429, retryAfter: 1 }, { status: 503 }],
      }),
    });
    const statuses = async (key: string): Promise<number[]> => [
      (await call(sim, { idempotencyKey: key })).status,
      (await call(sim, { idempotencyKey: key })).status,
      (await call(sim, { idempotencyKey: key })).status,
    ];
    expect(await statuses('rl-1')).toEqual([429, 503, 503]);
    expect(await statuses('rl-2')).toEqual([429, 503, 503]);
  });

  it("fall back to normal behaviour after the last step with then: 'normal'", async () => {
    const sim = await start({
      scenario: oneRule({ match: { idempotencyKey: 'k' }, steps: [{ status: 503 }], then: 'normal' }),
    });
    expect((await call(sim, { idempotencyKey: 'k' })).status).toBe(503);
    expect((await call(sim, { idempotencyKey: 'k' })).status).toBe(201);
    expect((await call(sim, { idempotencyKey: 'k' })).headers['idempotent-replayed']).toBe('true');
  });

  it("share one sequence between all keys with per: 'rule'", async () => {
    const sim = await start({ scenario: oneRule({ per: 'rule', steps: [{ status: 500 }, 'normal'], then: 'normal' }) });
    expect((await call(sim, { idempotencyKey: 'a' })).status).toBe(500);
    expect((await call(sim, { idempotencyKey: 'b' })).status).toBe(201);
    expect((await call(sim, { idempotencyKey: 'c' })).status).toBe(201);
  });

  it('let the first matching rule win and match methods, path prefixes and key globs', async () => {
    const sim = await start({
      scenario: {
        rules: [
          { match: { method: ['PUT', 'PATCH'] }, steps: [{ status: 409 }] },
          { match: { pathPrefix: '/v1/refunds', idempotencyKey: 'r-??' }, steps: [{ status: 422 }] },
          { match: { pathPrefix: '/v1/refunds' }, steps: [{ status: 400 }] },
        ],
      },
    });
    expect((await call(sim, { method: 'PATCH', path: '/v1/refunds' })).status).toBe(409);
    expect((await call(sim, { path: '/v1/refunds', idempotencyKey: 'r-12' })).status).toBe(422);
    expect((await call(sim, { path: '/v1/refunds', idempotencyKey: 'r-123' })).status).toBe(400);
    expect((await call(sim, { path: '/v1/refunds' })).status).toBe(400);
    expect((await call(sim, { method: 'DELETE', path: '/v1/charges/1' })).status).toBe(200);
  });
});

describe('commit-then steps (executed, then the answer is lost)', () => {
  it("commitThen 'timeout' records exactly one side effect and never answers; the status endpoint and a replay tell the truth", async () => {
    const sim = await start({
      scenario: oneRule({ match: { idempotencyKey: 'lost' }, steps: [{ commitThen: 'timeout' }], then: 'normal' }),
    });
    expect(await failureCode(call(sim, { idempotencyKey: 'lost', body: { amount: 9 }, timeoutMs: 300 }))).toBe(
      'UND_ERR_HEADERS_TIMEOUT',
    );
    expect(sim.sideEffects('lost')).toBe(1);
    const status = await call(sim, { method: 'GET', path: '/v1/operations/lost' });
    expect(status.json).toMatchObject({ status: 'succeeded', result: { request: { amount: 9 } } });
    const replay = await call(sim, { idempotencyKey: 'lost', body: { amount: 9 } });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(sim.sideEffects('lost')).toBe(1);
    expect(sim.metrics().totals.droppedResponses.held).toBe(1);
  });

  it("commitThen 'reset' records one side effect and destroys the socket", async () => {
    const sim = await start({ scenario: oneRule({ steps: [{ commitThen: 'reset' }], then: 'normal' }) });
    expect(await failureCode(call(sim, { idempotencyKey: 'k' }))).toBe('UND_ERR_SOCKET');
    expect(sim.sideEffects('k')).toBe(1);
    expect(sim.metrics().totals.droppedResponses.reset).toBe(1);
  });

  it.each([500, 502, 504] as const)(
    'commitThen %i answers that error after recording one side effect',
    async (status) => {
      const sim = await start({ scenario: oneRule({ steps: [{ commitThen: status }], then: 'normal' }) });
      const res = await call(sim, { idempotencyKey: 'k' });
      expect(res.status).toBe(status);
      expect(res.json.error?.type).toBe('api_error');
      expect(sim.sideEffects('k')).toBe(1);
      expect((await call(sim, { idempotencyKey: 'k' })).headers['idempotent-replayed']).toBe('true');
    },
  );

  it('close() destroys a held socket, so a client without a timeout is released', async () => {
    const sim = await start({ scenario: oneRule({ steps: [{ commitThen: 'timeout' }] }) });
    const pending = failureCode(call(sim, { idempotencyKey: 'held' }));
    await waitFor(() => sim.metrics().totals.droppedResponses.held === 1, 'the response to be held');
    await sim.close();
    expect(await pending).toBe('UND_ERR_SOCKET');
  });
});

describe('reset and delay steps', () => {
  it('{ reset: true } destroys the socket before executing, so nothing happens at the provider', async () => {
    const sim = await start({ scenario: oneRule({ steps: [{ reset: true }], then: 'normal' }) });
    expect(await failureCode(call(sim, { idempotencyKey: 'k' }))).toBe('UND_ERR_SOCKET');
    expect(sim.sideEffects('k')).toBe(0);
    expect(sim.operations()).toHaveLength(0);
    expect((await call(sim, { idempotencyKey: 'k' })).status).toBe(201);
    expect(sim.sideEffects('k')).toBe(1);
  });

  it('{ delayMs } answers normally after the delay, keeping the operation pending meanwhile', async () => {
    const sim = await start({ scenario: oneRule({ steps: [{ delayMs: 250 }] }) });
    const res = call(sim, { idempotencyKey: 'k' });
    await waitFor(() => sim.operations()[0]?.status === 'pending', 'the operation to be pending');
    expect((await res).status).toBe(201);
    expect(sim.operations()[0]?.status).toBe('succeeded');
  });

  it('a scripted error can be slow too', async () => {
    const sim = await start({ scenario: oneRule({ steps: [{ status: 504, delayMs: 50 }] }) });
    expect((await call(sim)).status).toBe(504);
  });
});

describe('503 bursts', () => {
  it('answer every write in the window with the burst status and Retry-After, and nothing before or after', async () => {
    const clock = new FakeClock();
    const sim = await start({
      now: clock.now,
      scenario: {
        bursts: [
          { afterMs: 10_000, durationMs: 5_000, retryAfter: 3 },
          { afterMs: 20_000, durationMs: 1_000 },
        ],
      },
    });
    expect((await call(sim, { idempotencyKey: 'a' })).status).toBe(201);
    clock.advance(10_000);
    const inBurst = await call(sim, { idempotencyKey: 'b' });
    expect(inBurst.status).toBe(503);
    expect(inBurst.json.error?.code).toBe('service_unavailable');
    expect(inBurst.headers['retry-after']).toBe('3');
    expect((await call(sim, { method: 'GET', path: '/v1/operations/a' })).status).toBe(200);
    clock.advance(5_000);
    expect((await call(sim, { idempotencyKey: 'b' })).status).toBe(201);
    clock.advance(5_000);
    const second = await call(sim, { idempotencyKey: 'c' });
    expect(second.status).toBe(503);
    expect(second.headers['retry-after']).toBeUndefined();
    expect(sim.sideEffects('b')).toBe(1);
    expect(sim.sideEffects('c')).toBe(0);
  });
});

describe('outages (refused connections)', () => {
  it('stopListening makes clients get ECONNREFUSED and resumeListening serves again on the same port', async () => {
    const sim = await start();
    const { port, url } = sim;
    expect((await call(sim)).status).toBe(201);
    await sim.stopListening();
    expect(sim.listening).toBe(false);
    expect(await failureCode(call(sim))).toBe('ECONNREFUSED');
    await sim.resumeListening();
    expect(sim.port).toBe(port);
    expect(sim.url).toBe(url);
    expect((await call(sim)).status).toBe(201);
  });

  it('outage(durationMs) refuses connections, then re-listens by itself', async () => {
    const sim = await start();
    const { resumed } = await sim.outage(200);
    expect(await failureCode(call(sim))).toBe('ECONNREFUSED');
    await resumed;
    expect((await call(sim)).status).toBe(201);
  });

  it('scenario outages start afterMs after the scenario is applied and end after durationMs', async () => {
    const sim = await start({ scenario: { outages: [{ afterMs: 0, durationMs: 600 }] } });
    await waitFor(() => !sim.listening, 'the outage to start');
    expect(await failureCode(call(sim))).toBe('ECONNREFUSED');
    await waitFor(() => sim.listening, 'the outage to end');
    expect((await call(sim)).status).toBe(201);
  });

  it('an outage destroys open connections, including held ones', async () => {
    const sim = await start({ scenario: oneRule({ steps: [{ commitThen: 'timeout' }], then: 'normal' }) });
    const held = failureCode(call(sim, { idempotencyKey: 'k' }));
    await waitFor(() => sim.metrics().totals.droppedResponses.held === 1, 'the response to be held');
    const { resumed } = await sim.outage(50);
    expect(await held).toBe('UND_ERR_SOCKET');
    await resumed;
    expect((await call(sim, { idempotencyKey: 'k' })).headers['idempotent-replayed']).toBe('true');
  });
});
