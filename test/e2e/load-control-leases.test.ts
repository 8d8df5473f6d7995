/**
 * Slot leases (docs/load-control.md, "Leases"): a busy worker process takes several dispatch slots ahead in one
 * update to its credential's entity and hands them out itself. Real Temporal dev server and the real entity
 * workflow; each `CredentialGates` below stands for one worker process (its own in-process view and lease; the only
 * thing two of them share is the entity). Their clocks are the tests' own: frozen, and moved on by hand, so a
 * lease's expiry is decided by the test, not by how fast the machine runs. Nothing asserts a duration.
 */
import { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import {
  CACHE_FRESH_MS,
  CredentialGates,
  LEASE_GRACE_MS,
  LEASE_WINDOW_MS,
} from '../../src/load-control/credential-gates.js';
import type { Admission } from '../../src/load-control/credential-gates.js';
import { slotIntervalMs, splitBudget } from '../../src/policy/load.js';
import type { BudgetSplit } from '../../src/policy/load.js';
import { credentialStateQuery, credentialWorkflowId } from '../../src/workflows/index.js';
import type { CredentialState } from '../../src/workflows/index.js';
import { CREDENTIAL, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness('dev-server');
/** Only the workflow role: it serves the credential's entity; the gates below are the "processes". */
const entityOnly = { roles: { workflows: true, actions: false, inspect: false } };

/** One worker process's load control, on a clock the test moves. */
function processGates(t: IntentTest, budget: BudgetSplit) {
  const clock = { nowMs: Date.now() };
  const gates = new CredentialGates({
    client: new Client({ connection: t.env.connection, namespace: t.env.namespace ?? 'default' }),
    prefix: t.prefix,
    budgets: new Map([[CREDENTIAL, budget]]),
    clock: () => clock.nowMs,
  });
  return {
    gates,
    /** Moves this process's clock on. */
    advance: (ms: number) => void (clock.nowMs += ms),
    leased: () => gates.views().get(CREDENTIAL)?.leased ?? 0,
    admit: (kind: 'dispatch' | 'inspect' = 'dispatch') => gates.admit(CREDENTIAL, kind),
  };
}

async function entityState(t: IntentTest): Promise<CredentialState> {
  return t.env.client.workflow.getHandle(credentialWorkflowId(CREDENTIAL, t.prefix)).query(credentialStateQuery);
}

const go = (a: Admission) => (a.kind === 'go' ? a : undefined);

describe('a busy worker process leases dispatch slots ahead', () => {
  it('hands leased slots out in order without asking the entity again, and the entity counts every one', async () => {
    const t = await h.setup();
    const budget = splitBudget(6_000, 0.2);
    const p = processGates(t, budget);
    await t.run(async () => {
      const admissions: Admission[] = [];
      for (let i = 0; i < 12; i++) admissions.push(await p.admit());
      expect(admissions.every((a) => a.kind === 'go')).toBe(true);
      const leasedGoes = admissions.filter((a) => go(a)?.leased).length;
      expect(leasedGoes).toBeGreaterThan(0);
      const state = await entityState(t);
      // Every send used a slot the entity handed out: granted to a want, or leased.
      expect(state.counters.granted.dispatch).toBe(12 - leasedGoes);
      expect((state.counters.leased ?? 0) - p.leased()).toBe(leasedGoes);
      // Each in its own slot on the entity's timeline, spaced by the budget.
      const slots = admissions.map((a) => go(a)?.slotAtMs ?? Number.NaN).sort((x, y) => x - y);
      for (let i = 1; i < slots.length; i++)
        expect(slots[i]! - slots[i - 1]!).toBeGreaterThanOrEqual(slotIntervalMs(budget.totalPerMinute) - 1);
    }, entityOnly);
  });

  it('never sends in a leased slot once it is more than the grace late: it asks the entity for a fresh one', async () => {
    const t = await h.setup();
    const p = processGates(t, splitBudget(6_000, 0.2));
    await t.run(async () => {
      for (let i = 0; i < 8; i++) expect((await p.admit()).kind).toBe('go');
      const held = p.leased();
      expect(held).toBeGreaterThan(0);
      const before = await entityState(t);
      // The process's clock passes every leased slot by more than the grace (none lies beyond the lease window).
      p.advance(LEASE_WINDOW_MS + LEASE_GRACE_MS + 1);
      const late = await p.admit();
      expect(late).toMatchObject({ kind: 'go', leased: false });
      const after = await entityState(t);
      expect(after.counters.granted.dispatch).toBe(before.counters.granted.dispatch + 1);
      // The stale slots were dropped, not kept for later.
      expect(p.leased()).toBeLessThanOrEqual((after.counters.leased ?? 0) - (before.counters.leased ?? 0));
    }, entityOnly);
  });

  it('keeps every process together within the budget: two processes never share a slot, and slots keep the spacing', async () => {
    const t = await h.setup();
    const budget = splitBudget(1_200, 0.2);
    const a = processGates(t, budget);
    const b = processGates(t, budget);
    await t.run(async () => {
      // Four calls at a time in each process, sixteen each; one inspection among them.
      const run = async (p: ReturnType<typeof processGates>) => {
        const out: Admission[] = [];
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            for (let i = 0; i < 4; i++) out.push(await p.admit());
          }),
        );
        return out;
      };
      const [fromA, fromB, inspection] = await Promise.all([run(a), run(b), a.admit('inspect')]);
      const all = [...fromA, ...fromB];
      expect(all.every((x) => x.kind === 'go')).toBe(true);
      // The reserve for inspections stays usable while both processes lease dispatch slots.
      expect(inspection.kind).toBe('go');
      const slots = [...all, inspection].map((x) => go(x)?.slotAtMs ?? Number.NaN).sort((x, y) => x - y);
      expect(new Set(slots).size).toBe(slots.length);
      for (let i = 1; i < slots.length; i++)
        expect(slots[i]! - slots[i - 1]!).toBeGreaterThanOrEqual(slotIntervalMs(budget.totalPerMinute) - 1);
      const state = await entityState(t);
      const handedOut = state.counters.granted.dispatch + (state.counters.leased ?? 0);
      expect(all.length).toBeLessThanOrEqual(handedOut);
      expect(all.filter((x) => go(x)?.leased).length).toBeGreaterThan(0);
    }, entityOnly);
  });
});

describe('a rate-limit answer voids leases', () => {
  it('in the process that saw it at once, and in another process at its check before sending', async () => {
    const t = await h.setup();
    const budget = splitBudget(6_000, 0.2);
    const a = processGates(t, budget);
    const b = processGates(t, budget);
    await t.run(async () => {
      for (const p of [a, b]) for (let i = 0; i < 8; i++) expect((await p.admit()).kind).toBe('go');
      expect(a.leased()).toBeGreaterThan(0);
      expect(b.leased()).toBeGreaterThan(0);

      await a.gates.rateLimited(CREDENTIAL, 'dispatch', 60_000, 'HTTP 429 rate_limit_exceeded (Retry-After: 60)');
      expect(a.leased()).toBe(0);
      expect(await a.admit()).toMatchObject({ kind: 'held', hold: { kind: 'rate_limited' } });

      // B still holds its lease and has not heard of the 429; its view is due for a check, its slots are still
      // within the grace: the check before sending finds the gate closed, and nothing goes.
      expect(b.leased()).toBeGreaterThan(0);
      b.advance(CACHE_FRESH_MS + 1);
      expect(CACHE_FRESH_MS + 1).toBeLessThan(LEASE_GRACE_MS);
      expect(await b.admit()).toMatchObject({ kind: 'held', hold: { kind: 'rate_limited' } });
      expect(b.leased()).toBe(0);
    }, entityOnly);
  });

  it('and a block does the same', async () => {
    const t = await h.setup();
    const p = processGates(t, splitBudget(6_000, 0.2));
    await t.run(async () => {
      for (let i = 0; i < 8; i++) expect((await p.admit()).kind).toBe('go');
      expect(p.leased()).toBeGreaterThan(0);
      await p.gates.blocked(CREDENTIAL, 'HTTP 402 spending_limit_exceeded', 'spending_limit_exceeded');
      expect(p.leased()).toBe(0);
      expect(await p.admit()).toMatchObject({ kind: 'held', hold: { kind: 'blocked' } });
    }, entityOnly);
  });
});

describe('when the credential entity is gone', () => {
  it('a process that sent plain updates to it starts it again (update-with-start) and carries on', async () => {
    const t = await h.setup();
    const p = processGates(t, splitBudget(6_000, 0.2));
    await t.run(async () => {
      expect((await p.admit()).kind).toBe('go');
      expect((await p.admit()).kind).toBe('go');
      const handle = t.env.client.workflow.getHandle(credentialWorkflowId(CREDENTIAL, t.prefix));
      const first = (await handle.describe()).runId;
      await handle.terminate('test: the entity is gone');
      // Past any lease: the next call has to reach the entity.
      p.advance(LEASE_WINDOW_MS + LEASE_GRACE_MS + 1);
      expect(await p.admit()).toMatchObject({ kind: 'go', leased: false });
      const now = await handle.describe();
      expect(now.runId).not.toBe(first);
      expect(now.status.name).toBe('RUNNING');
    }, entityOnly);
  });
});
