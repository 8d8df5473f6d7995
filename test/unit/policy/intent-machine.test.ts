/**
 * The intent's state machine (src/policy/intent-machine.ts), without Temporal: DESIGN.md's invariants 2–8 and 14 as
 * tables and fast-check properties over whole runs. A driver plays the shell's part: it carries out each command
 * (a sleep moves the clock to its end, a call gets the next scripted answer) and feeds the outcome back.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CallDecision, CallEvidence, CredentialHold } from '../../../src/policy/call-outcome.js';
import { initialState, step, webhookVerdictOf } from '../../../src/policy/intent-machine.js';
import type { InspectionAnswer, IntentCommand, IntentEvent, IntentState } from '../../../src/policy/intent-machine.js';
import { failureSentence, intentDetails, retryNowAnswer } from '../../../src/policy/intent-text.js';
import type { IntentSpec, WebhookDelivery } from '../../../src/intent-status.js';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const MIN = 60_000;

function specOf(over: Partial<IntentSpec['policy']> = {}, deadlineMs = 60 * MIN): IntentSpec {
  return {
    idempotencyKey: 'order-1',
    credential: 'acme',
    action: { method: 'POST', url: 'https://api.example.com/v1/charges', body: { amount: 1 } },
    deadline: new Date(T0 + deadlineMs).toISOString(),
    submittedAt: new Date(T0).toISOString(),
    policy: {
      maxAttempts: 5,
      baseDelayMs: 1000,
      maxBackoffMs: 30_000,
      multiplier: 2,
      jitter: 0.2,
      attemptTimeoutMs: 5000,
      ...over,
    },
    inspection: {
      url: 'https://api.example.com/v1/operations/{idempotencyKey}',
      stateField: 'status',
      succeeded: ['succeeded'],
      failed: ['failed'],
      resultField: 'result',
      errorField: 'error',
    },
    fingerprint: 'f',
  };
}

const sent: CallEvidence = { method: 'POST', status: 429, sent: 'yes' };

/** One scripted answer to a dispatch. */
type DispatchScript =
  | { kind: 'success' }
  | { kind: 'rate_limited' | 'transient'; waitMs?: number | undefined }
  | { kind: 'permanent' }
  | { kind: 'unknown_outcome' }
  | { kind: 'never_sent' }
  | { kind: 'held'; hold: 'rate_limited' | 'paced'; holdMs: number };

type InspectScript = 'absent' | 'succeeded' | 'pending' | 'failed' | 'error';

function dispatchEvent(a: DispatchScript): IntentEvent {
  switch (a.kind) {
    case 'success':
      return { type: 'dispatch_succeeded', result: { status: 201, body: { id: 'ch_1' } } };
    case 'rate_limited':
    case 'transient': {
      const decision: CallDecision = {
        kind: a.kind,
        ...(a.waitMs !== undefined ? { waitMs: a.waitMs, retryAfter: String(Math.ceil(a.waitMs / 1000)) } : {}),
      };
      return {
        type: 'dispatch_failed',
        evidence: { ...sent, status: a.kind === 'rate_limited' ? 429 : 503 },
        decision,
      };
    }
    case 'permanent':
      return {
        type: 'dispatch_failed',
        evidence: { ...sent, status: 403, code: 'permission_denied' },
        decision: { kind: 'permanent', reason: 'permission', code: 'permission_denied' },
      };
    case 'unknown_outcome':
      return {
        type: 'dispatch_failed',
        evidence: { method: 'POST', transport: 'reset', sent: 'unknown' },
        decision: { kind: 'unknown_outcome', reason: 'transport:reset after sending' },
      };
    case 'never_sent':
      return {
        type: 'dispatch_failed',
        evidence: { method: 'POST', transport: 'refused', sent: 'no' },
        decision: { kind: 'transient', reason: 'transport:refused' },
      };
    case 'held': {
      const hold: CredentialHold = { kind: a.hold, credential: 'acme', holdMs: a.holdMs, rank: 0, perMinute: 60 };
      return { type: 'dispatch_held', hold };
    }
  }
}

function inspectEvent(a: InspectScript): IntentEvent {
  const answer: InspectionAnswer =
    a === 'error'
      ? {
          kind: 'failed',
          evidence: { method: 'GET', status: 503, sent: 'yes' },
          decision: { kind: 'transient', reason: 'status:503' },
        }
      : a === 'absent'
        ? { kind: 'found', found: { kind: 'absent' } }
        : a === 'succeeded'
          ? { kind: 'found', found: { kind: 'succeeded', result: { id: 'ch_1' } } }
          : a === 'pending'
            ? { kind: 'found', found: { kind: 'pending', state: 'processing' } }
            : { kind: 'found', found: { kind: 'failed', error: { status: 402, code: 'card_declined' } } };
  return { type: 'inspected', answer };
}

interface Call {
  kind: 'dispatch' | 'inspect';
  atMs: number;
  attempt: number;
  /** The earliest time the provider or load control permitted this call. */
  permittedMs: number;
  /** What the call was answered. */
  answer?: DispatchScript | InspectScript;
}

interface Run {
  calls: Call[];
  final: IntentState;
  commandsAfterEnd: IntentCommand[];
  endedAtMs: number;
}

/**
 * Plays a whole run. Each call takes 100 ms; `retryNowAt` (a fraction of each sleep) asks "retry now" part-way
 * through a sleep. After the end, every kind of event is fed once more to see that nothing moves.
 */
function drive(
  spec: IntentSpec,
  dispatches: DispatchScript[],
  inspections: InspectScript[],
  options: { retryNowAt?: number[]; random?: () => number } = {},
): Run {
  let now = T0;
  let state = initialState(spec);
  const random = options.random ?? (() => 0.5);
  const calls: Call[] = [];
  let permitted = T0;
  const retryNows = [...(options.retryNowAt ?? [])];
  const feed = (event: IntentEvent): IntentCommand[] => {
    const r = step({ spec, nowMs: now, random }, state, event);
    state = r.state;
    return r.commands;
  };
  let commands = feed({ type: 'started' });
  for (let i = 0; i < 500; i++) {
    const command = commands.find((c) => c.kind !== 'abort_call');
    if (!command) throw new Error(`no command in stage ${state.stage}`);
    if (command.kind === 'finish') break;
    if (command.kind === 'sleep') {
      const r = retryNows.shift();
      if (r !== undefined && command.untilMs > now) {
        now += Math.floor((command.untilMs - now) * r);
        commands = feed({ type: 'retry_now' });
        if (commands.length > 0) continue;
      }
      now = Math.max(now, command.untilMs);
      commands = feed({ type: 'timer_fired' });
      continue;
    }
    const call: Call = { kind: command.kind, atMs: now, attempt: command.attempt, permittedMs: permitted };
    calls.push(call);
    now += 100;
    if (command.kind === 'dispatch') {
      const a = dispatches.shift() ?? { kind: 'success' };
      call.answer = a;
      if ((a.kind === 'rate_limited' || a.kind === 'transient') && a.waitMs !== undefined)
        permitted = Math.max(permitted, now + a.waitMs);
      if (a.kind === 'held' && a.hold === 'rate_limited') permitted = Math.max(permitted, now + a.holdMs);
      commands = feed(dispatchEvent(a));
    } else {
      const a = inspections.shift() ?? 'succeeded';
      call.answer = a;
      commands = feed(inspectEvent(a));
    }
  }
  const endedAtMs = now;
  const commandsAfterEnd = [
    ...feed({ type: 'timer_fired' }),
    ...feed({ type: 'retry_now' }),
    ...feed(dispatchEvent({ kind: 'success' })),
    ...feed({ type: 'cancel', reason: 'late' }),
  ];
  return { calls, final: state, commandsAfterEnd, endedAtMs };
}

const isSent = (a: Call['answer']) => typeof a === 'object' && a.kind !== 'held' && a.kind !== 'never_sent';

describe('the intent state machine, by example', () => {
  it('dispatches attempt 1 at once and succeeds on a 2xx', () => {
    const run = drive(specOf(), [{ kind: 'success' }], []);
    expect(run.calls.map((c) => [c.kind, c.attempt])).toEqual([['dispatch', 1]]);
    expect(run.final.status.phase).toBe('succeeded');
    expect(run.final.status.result).toEqual({ status: 201, body: { id: 'ch_1' } });
  });

  it('waits for a 2-minute Retry-After although maxBackoff is 30 s, then sends attempt 2 (invariants 2, 3)', () => {
    const run = drive(specOf(), [{ kind: 'rate_limited', waitMs: 2 * MIN }, { kind: 'success' }], []);
    expect(run.calls).toHaveLength(2);
    expect(run.calls[1]!.atMs - run.calls[0]!.atMs).toBeGreaterThanOrEqual(2 * MIN);
    expect(run.final.status.attemptLog[0]).toMatchObject({ floor: 'server' });
  });

  it('expires at once, recording the permitted time, when the server permits nothing before the deadline (invariant 3)', () => {
    const run = drive(specOf({}, 60 * MIN), [{ kind: 'rate_limited', waitMs: 120 * MIN }], []);
    expect(run.calls).toHaveLength(1);
    expect(run.final.status.phase).toBe('expired');
    expect(Date.parse(run.final.status.permittedAt!)).toBeGreaterThanOrEqual(T0 + 120 * MIN);
    expect(run.final.status.finalReason).toContain('past the deadline');
  });

  it('backs off when Retry-After is absent instead of retrying at once (invariant 4)', () => {
    const run = drive(specOf(), [{ kind: 'rate_limited' }, { kind: 'success' }], []);
    expect(run.calls[1]!.atMs - run.calls[0]!.atMs).toBeGreaterThanOrEqual(100 + 800);
  });

  it('inspects after an unknown outcome and finishes without another dispatch when the operation took effect (invariant 5)', () => {
    const run = drive(specOf(), [{ kind: 'unknown_outcome' }], ['succeeded']);
    expect(run.calls.map((c) => c.kind)).toEqual(['dispatch', 'inspect']);
    expect(run.final.status).toMatchObject({ phase: 'succeeded', reservation: undefined });
  });

  it('re-dispatches with the next attempt number only after the inspection found nothing (invariant 5)', () => {
    const run = drive(specOf(), [{ kind: 'unknown_outcome' }, { kind: 'success' }], ['pending', 'absent']);
    expect(run.calls.map((c) => `${c.kind}:${c.attempt}`)).toEqual([
      'dispatch:1',
      'inspect:1',
      'inspect:1',
      'dispatch:2',
    ]);
  });

  it('treats a failure the provider recorded under the key as final (invariant 5)', () => {
    const run = drive(specOf(), [{ kind: 'unknown_outcome' }], ['failed']);
    expect(run.calls.map((c) => c.kind)).toEqual(['dispatch', 'inspect']);
    expect(run.final.status.phase).toBe('failed');
  });

  it('stops after a permanent answer and sends nothing more (invariant 6)', () => {
    const run = drive(specOf(), [{ kind: 'permanent' }], []);
    expect(run.calls).toHaveLength(1);
    expect(run.final.status.phase).toBe('failed');
    expect(run.commandsAfterEnd).toEqual([]);
  });

  it('gives up after maxAttempts sent attempts (invariant 7)', () => {
    const run = drive(
      specOf({ maxAttempts: 3 }),
      Array.from({ length: 10 }, (): DispatchScript => ({ kind: 'transient', waitMs: 1000 })),
      [],
    );
    expect(run.calls).toHaveLength(3);
    expect(run.final.status.finalReason).toContain('attempt budget of 3 used up');
  });

  it('repeats the attempt number of a call load control held or that was never sent (invariant 14)', () => {
    const run = drive(
      specOf({ maxAttempts: 2 }),
      [
        { kind: 'held', hold: 'paced', holdMs: 5000 },
        { kind: 'never_sent' },
        { kind: 'transient' },
        { kind: 'success' },
      ],
      [],
    );
    expect(run.calls.map((c) => c.attempt)).toEqual([1, 1, 1, 2]);
    expect(run.final.status).toMatchObject({ phase: 'succeeded', attempts: 2 });
  });

  it('holds until the gate opens after a rate-limited hold and says why in the details', () => {
    const spec = specOf();
    let state = step({ spec, nowMs: T0, random: () => 0.5 }, initialState(spec), { type: 'started' }).state;
    const r = step(
      { spec, nowMs: T0 + 100, random: () => 0.5 },
      state,
      dispatchEvent({ kind: 'held', hold: 'rate_limited', holdMs: 30_000 }),
    );
    state = r.state;
    expect(r.commands[0]).toMatchObject({ kind: 'sleep' });
    expect((r.commands[0] as { untilMs: number }).untilMs).toBeGreaterThanOrEqual(T0 + 100 + 30_000);
    expect(state.status.attempts).toBe(0);
    expect(intentDetails(state, spec, T0 + 200)).toMatch(/credential acme is rate limited until .*Nothing was sent/);
    expect(retryNowAnswer(state, T0 + 200)).toMatchObject({ why: 'gate' });
  });
});

describe('the intent state machine, cancel, retry now and webhooks', () => {
  const spec = specOf();
  const ctx = (nowMs: number) => ({ spec, nowMs, random: () => 0.5 });

  it('aborts the dispatch in flight on cancel and ends cancelled with nothing sent when it never started', () => {
    let { state } = step(ctx(T0), initialState(spec), { type: 'started' });
    const c = step(ctx(T0 + 10), state, { type: 'cancel', reason: 'user' });
    expect(c.commands).toEqual([{ kind: 'abort_call' }]);
    const end = step(ctx(T0 + 20), c.state, { type: 'dispatch_unsent' });
    state = end.state;
    expect(end.commands).toEqual([{ kind: 'finish', phase: 'cancelled' }]);
    expect(state.status.attempts).toBe(0);
    expect(state.status.reservation).toBeUndefined();
  });

  it('leaves a reservation when a cancel aborted a request that had gone out', () => {
    const { state } = step(ctx(T0), initialState(spec), { type: 'started' });
    const c = step(ctx(T0 + 10), state, { type: 'cancel', reason: 'user' });
    const end = step(ctx(T0 + 20), c.state, {
      type: 'dispatch_failed',
      evidence: { method: 'POST', transport: 'other', sent: 'unknown' },
      decision: { kind: 'unknown_outcome', reason: 'aborted' },
    });
    expect(end.state.status.phase).toBe('cancelled');
    expect(end.state.status.reservation?.reason).toContain('in flight when the intent was cancelled');
  });

  it('shortens a backoff on "retry now" but never below the server floor (invariant 2)', () => {
    let { state } = step(ctx(T0), initialState(spec), { type: 'started' });
    state = step(ctx(T0 + 100), state, dispatchEvent({ kind: 'rate_limited', waitMs: 60_000 })).state;
    const early = step(ctx(T0 + 1000), state, { type: 'retry_now' });
    expect(early.commands).toEqual([]);
    expect(retryNowAnswer(early.state, T0 + 1000).why).toBe('server_floor');
    const transientSpec = specOf({ baseDelayMs: 600_000, maxBackoffMs: 600_000, jitter: 0 });
    let t = step({ ...ctx(T0), spec: transientSpec }, initialState(transientSpec), { type: 'started' }).state;
    t = step({ ...ctx(T0 + 100), spec: transientSpec }, t, dispatchEvent({ kind: 'transient' })).state;
    const now = step({ ...ctx(T0 + 5000), spec: transientSpec }, t, { type: 'retry_now' });
    expect(now.commands).toEqual([{ kind: 'dispatch', attempt: 2 }]);
  });

  it('settles an intent from a webhook during its inspection, and turns away a duplicate or a delivery after the end', () => {
    let { state } = step(ctx(T0), initialState(spec), { type: 'started' });
    state = step(ctx(T0 + 100), state, dispatchEvent({ kind: 'unknown_outcome' })).state; // inspection starts
    const d: WebhookDelivery = { source: 'acme', deliveryId: 'dlv_1', state: 'succeeded', receivedAt: '' };
    const w = step(ctx(T0 + 200), state, { type: 'webhook', delivery: d });
    expect(w.commands).toEqual([{ kind: 'abort_call' }]);
    expect(webhookVerdictOf(w.state, d).kind).toBe('duplicate');
    const end = step(ctx(T0 + 300), w.state, { type: 'inspected', answer: { kind: 'cancelled' } });
    expect(end.state.status).toMatchObject({ phase: 'succeeded', resolvedByWebhook: { deliveryId: 'dlv_1' } });
    const again = step(ctx(T0 + 400), end.state, { type: 'webhook', delivery: d });
    expect(again.commands).toEqual([]);
    expect(again.state.status.webhooks).toEqual({ received: 1, late: 0 });
    expect(webhookVerdictOf(end.state, { ...d, deliveryId: 'dlv_2' }).kind).toBe('ended');
  });

  it('writes a failure sentence that names the reservation to reconcile', () => {
    const run = drive(
      specOf({}, 5 * MIN),
      [{ kind: 'unknown_outcome' }],
      Array.from({ length: 50 }, (): InspectScript => 'error'),
    );
    expect(run.final.status.phase).toBe('expired');
    expect(failureSentence(run.final, specOf())).toMatch(
      /Reservation to reconcile: attempt 1: transport:reset after sending/,
    );
  });

  it('never changes the state it was given', () => {
    const state = initialState(spec);
    const before = JSON.stringify(state);
    step(ctx(T0), state, { type: 'started' });
    expect(JSON.stringify(state)).toBe(before);
  });
});

const dispatchArb: fc.Arbitrary<DispatchScript> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'success' } as const) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constantFrom('rate_limited' as const, 'transient' as const),
      waitMs: fc.option(fc.integer({ min: 0, max: 3 * 3_600_000 }), { nil: undefined }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'permanent' } as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'unknown_outcome' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'never_sent' } as const) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('held' as const),
      hold: fc.constantFrom('rate_limited' as const, 'paced' as const),
      holdMs: fc.integer({ min: 0, max: 600_000 }),
    }),
  },
);
const inspectArb = fc.constantFrom<InspectScript>('absent', 'succeeded', 'pending', 'failed', 'error');
const runArb = fc.record({
  maxAttempts: fc.integer({ min: 1, max: 8 }),
  deadlineMs: fc.integer({ min: MIN, max: 12 * 3_600_000 }),
  dispatches: fc.array(dispatchArb, { maxLength: 30 }),
  inspections: fc.array(inspectArb, { maxLength: 30 }),
  retryNowAt: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 10 }),
  random: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
});
type RunInput = typeof runArb extends fc.Arbitrary<infer T> ? T : never;
const play = (r: RunInput) => {
  const spec = specOf({ maxAttempts: r.maxAttempts }, r.deadlineMs);
  return {
    spec,
    run: drive(spec, [...r.dispatches], [...r.inspections], { retryNowAt: r.retryNowAt, random: () => r.random }),
  };
};

describe('the intent state machine, properties over whole runs (500 runs each)', () => {
  it('never calls the provider before the permitted time, even when "retry now" is asked (invariant 2)', () => {
    fc.assert(
      fc.property(runArb, (r) => {
        const { run } = play(r);
        for (const c of run.calls) if (c.kind === 'dispatch') expect(c.atMs).toBeGreaterThanOrEqual(c.permittedMs);
      }),
      { numRuns: 500 },
    );
  });

  it('never retries at once after a rate limit or transient answer unless asked to (invariants 3, 4)', () => {
    fc.assert(
      fc.property(runArb, (r) => {
        const { run } = play({ ...r, retryNowAt: [] });
        run.calls.forEach((c, i) => {
          const next = run.calls[i + 1];
          const a = c.answer;
          if (next && typeof a === 'object' && (a.kind === 'rate_limited' || a.kind === 'transient'))
            expect(next.atMs).toBeGreaterThan(c.atMs + 100);
        });
      }),
      { numRuns: 500 },
    );
  });

  it('inspects after every unknown outcome before any other dispatch (invariant 5)', () => {
    fc.assert(
      fc.property(runArb, (r) => {
        const { run } = play(r);
        run.calls.forEach((c, i) => {
          const a = c.answer;
          const next = run.calls[i + 1];
          if (next && typeof a === 'object' && a.kind === 'unknown_outcome') expect(next.kind).toBe('inspect');
          if (next && a === 'failed') throw new Error('a recorded failure was followed by another call');
        });
      }),
      { numRuns: 500 },
    );
  });

  it('sends nothing after a permanent answer, and nothing moves an ended intent (invariant 6)', () => {
    fc.assert(
      fc.property(runArb, (r) => {
        const { run } = play(r);
        const permanent = run.calls.findIndex((c) => typeof c.answer === 'object' && c.answer.kind === 'permanent');
        if (permanent >= 0) expect(run.calls).toHaveLength(permanent + 1);
        expect(run.commandsAfterEnd).toEqual([]);
        expect(['succeeded', 'failed', 'expired', 'cancelled']).toContain(run.final.status.phase);
      }),
      { numRuns: 500 },
    );
  });

  it('sends at most maxAttempts attempts and no call after the deadline (invariants 7, 14)', () => {
    fc.assert(
      fc.property(runArb, (r) => {
        const { spec, run } = play(r);
        const sentAttempts = run.calls.filter((c) => c.kind === 'dispatch' && isSent(c.answer));
        expect(sentAttempts.length).toBeLessThanOrEqual(r.maxAttempts);
        expect(run.final.status.attempts).toBe(sentAttempts.length);
        for (const c of run.calls) expect(c.atMs).toBeLessThan(Date.parse(spec.deadline));
      }),
      { numRuns: 500 },
    );
  });

  it('numbers sent attempts 1, 2, 3, …, and a held or never-sent call repeats its number (invariants 8, 14)', () => {
    fc.assert(
      fc.property(runArb, (r) => {
        const { run } = play(r);
        let expected = 1;
        for (const c of run.calls.filter((x) => x.kind === 'dispatch')) {
          expect(c.attempt).toBe(expected);
          if (isSent(c.answer) && c.answer && typeof c.answer === 'object' && c.answer.kind !== 'unknown_outcome')
            expected++;
          else if (typeof c.answer === 'object' && c.answer.kind === 'unknown_outcome') expected++;
        }
      }),
      { numRuns: 500 },
    );
  });
});
