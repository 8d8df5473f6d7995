/**
 * The chaos suite in CI: `npm run chaos -- --short` as a test. One world (a Temporal dev server on a SQLite file and
 * free ports, the provider simulator, two retryq worker processes), every scenario of scripts/chaos/scenarios.ts
 * at the short size, each asserting 0 duplicate side effects, 0 early attempts and 0 lost intents, and that every
 * intent succeeded. Sized for a 2-core machine (a few intents per scenario).
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScenarios, scenarios, sizes } from '../../scripts/chaos/scenarios.js';
import { World } from '../../scripts/chaos/world.js';

let world: World | undefined;
const started = (): World => {
  if (!world) throw new Error('the chaos world did not start (beforeAll failed?)');
  return world;
};

beforeAll(async () => {
  world = await World.start();
  await Promise.all([world.startWorker('workflows,actions,inspect'), world.startWorker('workflows,inspect')]);
}, 400_000);
afterAll(async () => {
  await world?.close();
}, 60_000);

describe('the chaos checks (control cases: each can fail)', () => {
  it('count a second execution of one key as a duplicate side effect, and an intent without outcome as lost', async () => {
    const w = started();
    w.setProvider({ honorIdempotencyKeys: false });
    for (let i = 0; i < 2; i++) {
      const res = await request(`${w.sim.url}/v1/charges`, {
        method: 'POST',
        headers: {
          authorization: 'Bearer sk_test_acme',
          'idempotency-key': 'control-dup',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ amount: 1 }),
      });
      await res.body.dump();
    }
    w.setProvider({});
    expect(w.check(['control-dup'], new Map())).toMatchObject({ duplicateSideEffects: 1, lostIntents: 1 });
  });

  it("count a call answered before an earlier answer's Retry-After permitted as an early attempt", () => {
    const w = started();
    const base = {
      method: 'POST',
      path: '/v1/charges',
      keyId: 'acme-prod',
      idempotencyKey: 'control-early',
      kind: 'dispatch' as const,
      key: 'control-early',
    };
    w.answers.push(
      { ...base, atMs: 1_000, status: 503, retryAfter: '5' },
      { ...base, atMs: 3_000, status: 201, retryAfter: undefined },
    );
    expect(w.check(['control-early'], new Map()).earlyAttempts).toBe(1);
  });
});

describe('under faults (the short chaos suite)', () => {
  for (const sc of scenarios)
    it(`${sc.name}: every intent succeeds with 0 duplicate side effects, 0 early attempts, 0 lost intents`, async () => {
      const [report] = await runScenarios(started(), sizes.short, [sc.name]);
      expect(report?.checks).toMatchObject({
        duplicateSideEffects: 0,
        earlyAttempts: 0,
        lostIntents: 0,
        succeededWithoutOneSideEffect: 0,
        overBudget: 0,
        outcomes: { succeeded: sizes.short.intents },
      });
      expect(report?.ok).toBe(true);
    }, 300_000);
});
