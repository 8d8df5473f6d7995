/**
 * What people see and do with an intent: the status query, the UI's details line, search attributes, secrets kept
 * out of all of them (invariant 9), cancel and "retry now" (invariant 2), and input validation at submit.
 * Time-skipping; the provider is the simulator on a real port.
 */
import { WorkflowNotFoundError } from '@temporalio/common';
import { describe, expect, it, vi } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { IntentAlreadyEndedError, IntentNotFoundError, IntentValidationError } from '../../src/errors.js';
import { IntentFailureType } from '../../src/failures.js';
import type { IntentInput, IntentOutcome } from '../../src/intent.js';
import {
  credentialKey,
  lastErrorCodeKey,
  nextAttemptAtKey,
  retryAttemptKey,
  retryPhaseKey,
} from '../../src/search-attributes.js';
import type { ScenarioInput } from '../../src/sim/index.js';
import { SIM_SECRET, dispatchTimes, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness();

const waitingOn120s: ScenarioInput = {
  rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: 120 }], then: 'normal' }],
};

/** Every string in a value, Uint8Arrays (payload data) decoded as UTF-8: what a reader of the history could see. */
function allText(value: unknown, out: string[] = [], seen = new Set<unknown>()): string[] {
  if (typeof value === 'string') out.push(value);
  else if (value instanceof Uint8Array) out.push(Buffer.from(value).toString('utf8'));
  else if (value !== null && typeof value === 'object' && !seen.has(value)) {
    seen.add(value);
    for (const v of Object.values(value)) allText(v, out, seen);
  }
  return out;
}

/** The UI's "current details" line, through the SDK's built-in metadata query. */
async function currentDetails(t: IntentTest, key: string): Promise<string> {
  const metadata = await t.env.client.workflow
    .getHandle(workflowIdOf(key))
    .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  return metadata.currentDetails ?? '';
}

describe('while an intent waits for the provider', () => {
  it('reports phase, attempts, last evidence, next attempt, permitted time and deadline in the status query', async () => {
    const t = await h.setup(waitingOn120s);
    const input = t.intent({ deadline: '1h' });
    await t.run(async () => {
      const before = await t.now();
      await t.submit(input);
      const s = await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      expect(s).toMatchObject({
        idempotencyKey: input.idempotencyKey,
        credential: 'acme-prod',
        phase: 'waiting',
        attempts: 1,
        maxAttempts: 10,
        inspections: 0,
        lastEvidence: {
          status: 429,
          code: 'rate_limit_exceeded',
          sent: 'yes',
          decision: 'rate_limited',
          retryAfter: '120',
        },
        attemptLogDropped: 0,
      });
      expect(s.nextAttemptAt).toBe(s.permittedAt);
      expect(ms(s.permittedAt) - ms(s.attemptLog[0]?.startedAt)).toBeGreaterThanOrEqual(120_000);
      expect(ms(s.deadline) - before).toBeGreaterThanOrEqual(3_600_000);
      expect(ms(s.deadline) - before).toBeLessThan(3_600_000 + 60_000);
      expect(s.attemptLog).toHaveLength(1);
      expect(s.result).toBeUndefined();
      expect(s.finalReason).toBeUndefined();
    });
  });

  it('tells a person in the UI until when and why it waits', async () => {
    const t = await h.setup(waitingOn120s);
    const input = t.intent();
    await t.run(async () => {
      await t.submit(input);
      const s = await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      const until = s.permittedAt!.slice(11, 19);
      expect(await currentDetails(t, input.idempotencyKey)).toBe(
        `Waiting for provider until ${until} UTC (Retry-After 120 s, attempt 1/10).`,
      );
      const desc = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).describe();
      expect(await desc.staticSummary()).toContain(input.idempotencyKey);
      await t.client.result(input.idempotencyKey);
      expect(await currentDetails(t, input.idempotencyKey)).toBe('Succeeded after 2 attempts.');
    });
  });

  it('publishes phase, attempt, next attempt time, last error code and credential as search attributes', async () => {
    const t = await h.setup(waitingOn120s);
    const input = t.intent();
    await t.run(async () => {
      await t.submit(input);
      const s = await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      const attrs = (await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).describe())
        .typedSearchAttributes;
      expect(attrs.get(retryPhaseKey)).toBe('waiting');
      expect(attrs.get(retryAttemptKey)).toBe(1);
      expect(attrs.get(nextAttemptAtKey)?.toISOString()).toBe(s.nextAttemptAt);
      expect(attrs.get(lastErrorCodeKey)).toBe('rate_limit_exceeded');
      expect(attrs.get(credentialKey)).toBe('acme-prod');
    });
  });
});

describe('secrets (invariant 9)', () => {
  it('never puts the credential secret in history, memo, search attributes, status or UI text', async () => {
    // Rate-limited, then committed-and-lost, then inspected: dispatch and inspect activities, failures with details.
    const t = await h.setup({
      rules: [
        {
          match: { idempotencyKeyPrefix: 'order-' },
          steps: [{ status: 429, retryAfter: 5 }, { commitThen: 'reset' }],
          then: 'normal',
        },
      ],
    });
    const input = t.intent();
    // Everything a person or tool could read, collected while a worker runs (queries need one).
    const { outcome, visible } = await t.run(async () => {
      await t.submit(input);
      const result = await t.client.result(input.idempotencyKey);
      const handle = t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey));
      const history = await handle.fetchHistory();
      expect(history.events?.length).toBeGreaterThan(10);
      const desc = await handle.describe();
      const text = allText([
        history,
        desc.memo,
        desc.typedSearchAttributes.toJSON(),
        desc.raw,
        result,
        await t.client.status(input.idempotencyKey),
        await handle.query('__temporal_workflow_metadata'),
        await desc.staticSummary(),
        await desc.staticDetails(),
      ]).join('\n');
      return { outcome: result, visible: text };
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2, inspections: 1 });
    // The secret did travel, on every request, added by the worker.
    expect(t.sent.length).toBe(3);
    for (const r of t.sent) expect(r.headers['authorization']).toBe(`Bearer ${SIM_SECRET}`);
    expect(visible).toContain(input.idempotencyKey);
    expect(visible).not.toContain(SIM_SECRET);
    expect(visible.toLowerCase()).not.toContain('bearer');
  });

  it('redacts the secret when the provider echoes it in an error message (history, outcome, logs)', async () => {
    // Some providers quote the key they rejected ("Incorrect API key provided: sk_…").
    const t = await h.setup({
      rules: [
        {
          match: { idempotencyKeyPrefix: 'order-' },
          steps: [
            { status: 503, message: `upstream refused key ${SIM_SECRET}` },
            { status: 401, code: 'invalid_api_key', message: `Incorrect API key provided: ${SIM_SECRET}` },
          ],
        },
      ],
    });
    const input = t.intent();
    const logged: string[] = [];
    const spies = [process.stderr, process.stdout].map((stream) =>
      vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
        logged.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
        return true;
      }),
    );
    let visible: string;
    let outcome: IntentOutcome;
    try {
      ({ outcome, visible } = await t.run(async () => {
        await t.submit(input);
        const result = await t.client.result(input.idempotencyKey);
        const history = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).fetchHistory();
        return { outcome: result, visible: allText([history, result]).join('\n') };
      }));
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    expect(outcome).toMatchObject({ phase: 'failed', attempts: 2, lastEvidence: { status: 401 } });
    expect(visible).toContain('Incorrect API key provided');
    expect(visible).not.toContain(SIM_SECRET);
    expect(logged.join('')).not.toContain(SIM_SECRET);
  });

  it('rejects secret-bearing headers and URLs at submit without echoing the secret', async () => {
    const t = await h.setup();
    const base = t.intent();
    const attempts: Array<[IntentInput, string]> = [
      [
        { ...base, action: { ...base.action, headers: { Authorization: 'Bearer sk_live_leak' } } },
        'action.headers.Authorization',
      ],
      [{ ...base, action: { ...base.action, headers: { 'X-Api-Key': 'sk_live_leak' } } }, 'action.headers.X-Api-Key'],
      [
        { ...base, action: { ...base.action, url: base.action.url.replace('http://', 'http://user:sk_live_leak@') } },
        'action.url',
      ],
      [{ ...base, action: { ...base.action, url: `${base.action.url}?api_key=sk_live_leak` } }, 'action.url'],
    ];
    for (const [input, path] of attempts) {
      const err = await t.submit(input).catch((e: unknown) => e);
      expect(err, path).toBeInstanceOf(IntentValidationError);
      const issues = (err as IntentValidationError).problems;
      expect(issues.map((i) => i.path)).toContain(path);
      expect((err as Error).message).not.toContain('sk_live_leak');
      expect(JSON.stringify(issues)).not.toContain('sk_live_leak');
    }
    await expect(t.client.status(base.idempotencyKey)).rejects.toBeInstanceOf(IntentNotFoundError);
  });
});

describe('what every attempt sends (invariant 8)', () => {
  it("sends each header once, the intent's own headers winning whatever their case", async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 503 }], then: 'normal' }],
    });
    const input = t.intent({
      action: {
        ...t.intent().action,
        headers: { 'Content-Type': 'application/json; charset=utf-8', 'User-Agent': 'billing/2.1', 'X-Tenant': 't-42' },
      },
    });
    await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    const sent = expectStableDispatches(t, input, 2);
    for (const r of sent) {
      const names = r.headerNames.map((n) => n.toLowerCase());
      expect(names.length, names.join(', ')).toBe(new Set(names).size);
      expect(r.headers).toMatchObject({
        'content-type': 'application/json; charset=utf-8',
        'user-agent': 'billing/2.1',
        'x-tenant': 't-42',
        'idempotency-key': input.idempotencyKey,
      });
    }
  });
});

describe('input validation', () => {
  it('names every wrong field and starts nothing', async () => {
    const t = await h.setup();
    const good = t.intent();
    const cases: Array<[IntentInput, string, RegExp]> = [
      [{ ...good, idempotencyKey: 'has space' }, 'idempotencyKey', /must start with a letter or digit/],
      [{ ...good, idempotencyKey: 'k'.repeat(201) }, 'idempotencyKey', /at most 200/],
      [{ ...good, credential: 'Acme Prod' }, 'credential', /a-z/],
      [{ ...good, action: { ...good.action, url: 'ftp://example.com/x' } }, 'action.url', /http or https/],
      [
        { ...good, action: { ...good.action, method: 'POST' }, inspection: undefined },
        'inspection',
        /required for POST/,
      ],
      [{ ...good, action: { method: 'GET', url: good.action.url, body: { a: 1 } } }, 'action.body', /must be absent/],
      [{ ...good, deadline: '2001-01-01T00:00:00Z' }, 'deadline', /future/],
      [{ ...good, deadline: 'soonish' }, 'deadline', /ISO 8601/],
      [{ ...good, policy: { baseDelay: '10s', maxBackoff: '1s' } }, 'policy.maxBackoff', /at least policy.baseDelay/],
      [{ ...good, policy: { maxAttempts: 0 } }, 'policy.maxAttempts', /./],
      [
        { ...good, action: { ...good.action, headers: { 'Idempotency-Key': 'other' } } },
        'action.headers.Idempotency-Key',
        /retryq manages/,
      ],
    ];
    for (const [input, path, message] of cases) {
      const err = await t.submit(input).catch((e: unknown) => e);
      expect(err, path).toBeInstanceOf(IntentValidationError);
      const issue = (err as IntentValidationError).problems.find((i) => i.path === path);
      expect(issue, `${path} in ${JSON.stringify((err as IntentValidationError).problems)}`).toBeDefined();
      expect(issue?.message).toMatch(message);
      expect((err as Error).message).toContain(path);
    }
    await expect(t.env.client.workflow.getHandle(workflowIdOf(good.idempotencyKey)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );
    expect(t.sim.metrics().totals.requests).toBe(0);
  });
});

describe('when an operator cancels', () => {
  it('stops a waiting intent: no further dispatch, the reason recorded, no reservation', async () => {
    const t = await h.setup(waitingOn120s);
    const input = t.intent();
    const failure = await t.run(async () => {
      await t.submit(input);
      await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      await t.client.cancel(input.idempotencyKey, 'customer changed their mind');
      const f = await t.failureOf(input.idempotencyKey);
      await t.env.sleep(3_600_000);
      return f;
    });
    expect(failure.type).toBe(IntentFailureType.IntentCancelled);
    const outcome = failure.details?.[0] as IntentOutcome;
    expect(outcome).toMatchObject({
      phase: 'cancelled',
      attempts: 1,
      cancelRequested: 'customer changed their mind',
      finalReason: 'customer changed their mind',
    });
    expect(outcome.reservation).toBeUndefined();
    expect(outcome.nextAttemptAt).toBeUndefined();
    expectStableDispatches(t, input, 1);
  });

  it('records a cancellation through Temporal (UI button) as cancelled with the last status', async () => {
    const t = await h.setup(waitingOn120s);
    const input = t.intent();
    const outcome = await t.run(async () => {
      await t.submit(input);
      await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).cancel();
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 1, cancelRequested: 'cancelled through Temporal' });
    expect(outcome.reservation).toBeUndefined();
    expectStableDispatches(t, input, 1);
  });
});

describe('when an operator acts on an intent that already ended', () => {
  it('says it ended (still an IntentNotFoundError for callers), and an unknown key says it does not exist', async () => {
    const t = await h.setup();
    const input = t.intent();
    await t.run(async () => {
      await t.submit(input);
      await t.client.result(input.idempotencyKey);
      for (const act of [
        () => t.client.cancel(input.idempotencyKey, 'late'),
        () => t.client.retryNow(input.idempotencyKey),
      ]) {
        const err = await act().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(IntentAlreadyEndedError);
        expect(err).toBeInstanceOf(IntentNotFoundError);
        expect((err as IntentAlreadyEndedError).phase).toBe('succeeded');
        expect((err as Error).message).toContain('has already ended (succeeded)');
      }
      const unknown = await t.client.cancel(t.newKey(), 'never existed').catch((e: unknown) => e);
      expect(unknown).toBeInstanceOf(IntentNotFoundError);
      expect(unknown).not.toBeInstanceOf(IntentAlreadyEndedError);
    });
    expect(await t.client.result(input.idempotencyKey)).toMatchObject({ phase: 'succeeded' });
    expectStableDispatches(t, input, 1);
  });
});

describe('when an operator asks to retry now (invariant 2)', () => {
  it('still waits for the server-permitted time', async () => {
    const t = await h.setup(waitingOn120s);
    const input = t.intent();
    const outcome = await t.run(async () => {
      await t.submit(input);
      const waiting = await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      await t.client.retryNow(input.idempotencyKey);
      await t.env.sleep(60_000);
      const later = await t.client.status(input.idempotencyKey);
      expect(later).toMatchObject({ phase: 'waiting', attempts: 1, nextAttemptAt: waiting.permittedAt });
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    const [, second] = dispatchTimes(t, input.idempotencyKey);
    expect(second).toBeGreaterThanOrEqual(ms(outcome.permittedAt));
    expectStableDispatches(t, input, 2);
  });

  it('ends a local backoff at once when the server set no floor', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 503 }], then: 'normal' }],
    });
    const input = t.intent({ policy: { baseDelay: '10m', maxBackoff: '10m' } });
    const outcome = await t.run(async () => {
      await t.submit(input);
      const waiting = await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'waiting', 'waiting');
      expect(ms(waiting.nextAttemptAt) - ms(waiting.attemptLog[0]?.startedAt)).toBeGreaterThanOrEqual(600_000);
      await t.client.retryNow(input.idempotencyKey);
      // No time is skipped here: the second attempt can only come from the operator's request.
      return t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'succeeded', 'succeeded');
    });
    expect(outcome.attempts).toBe(2);
    const [first, second] = dispatchTimes(t, input.idempotencyKey);
    expect(second! - first!).toBeLessThan(600_000);
    expectStableDispatches(t, input, 2);
  });
});
