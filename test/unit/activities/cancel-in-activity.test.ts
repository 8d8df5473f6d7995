/**
 * What a cancelled activity reports, which the intent workflow relies on to tell "nothing was sent" (no attempt, no
 * reservation) from "the request may have reached the provider" (a reservation): a cancel before the request may
 * leave ends the activity as cancelled; a cancel after that aborts the request and the activity reports a call of
 * unknown outcome. Real HTTP server on port 0; the activity context is the SDK's MockActivityEnvironment, whose
 * `cancel()` is what a heartbeat delivers from the server.
 */
import type { Server } from 'node:http';
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, silentProvider } from '../../support/silent-provider.js';
import { whileHeartbeating } from '../../../src/activities/heartbeat.js';
import { makeDispatch } from '../../../src/activities/dispatch.js';
import type { DispatchInput } from '../../../src/activities/dispatch.js';
import { FailureType, answerFromFailure, isProviderFailure } from '../../../src/failures.js';

const servers: Server[] = [];
const agents: Agent[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await closeServer(s);
  for (const a of agents.splice(0)) await a.close();
});

function agent(): Agent {
  const a = new Agent();
  agents.push(a);
  return a;
}

describe('when a dispatch activity is cancelled', () => {
  it('before its request may leave (e.g. waiting for a send slot): it ends as cancelled, and nothing is sent', async () => {
    const env = new MockActivityEnvironment();
    let sent = false;
    const run = env.run(() =>
      whileHeartbeating(async (sending) => {
        // Waits for a slot that only the cancel ends, as the credential's load control does.
        await new Promise<void>((_, reject) =>
          env.context.cancellationSignal.addEventListener('abort', () =>
            reject(new Error('slot wait aborted', { cause: env.context.cancellationSignal.reason })),
          ),
        );
        sending();
        sent = true;
      }),
    );
    env.cancel();
    await expect(run).rejects.toBeInstanceOf(CancelledFailure);
    expect(sent).toBe(false);
  });

  it('after its request went out: it aborts the request and fails as a call of unknown outcome, not as cancelled', async () => {
    const provider = await silentProvider();
    servers.push(provider.server);
    const dispatch = makeDispatch({
      http: agent(),
      credentials: { authHeaders: () => ({ authorization: 'Bearer test-secret' }) },
      clock: Date.now,
    });
    const env = new MockActivityEnvironment();
    const input: DispatchInput = {
      idempotencyKey: 'order-1',
      credential: 'acme',
      action: { method: 'POST', url: `${provider.url}/v1/charges`, body: { amount: 1 } },
      attempt: 1,
      // Only the cancel can end the call within this test.
      timeoutMs: 600_000,
    };
    const run = env.run(dispatch, input).catch((e: unknown) => e);
    await provider.arrived;
    env.cancel();
    await provider.closed;
    const err = await run;
    expect(err).not.toBeInstanceOf(CancelledFailure);
    expect(isProviderFailure(err)).toBe(true);
    expect((err as { type: string }).type).toBe(FailureType.OutcomeUnknown);
    const answer = answerFromFailure(err, 'POST', 'dispatch');
    expect(answer.evidence).toMatchObject({ sent: 'unknown' });
    expect(answer.evidence.status).toBeUndefined();
    expect(answer.decision.kind).toBe('unknown_outcome');
  });

  it('whose answer arrived before the cancel: the answer stands', async () => {
    const env = new MockActivityEnvironment();
    const answer = await env.run(() =>
      whileHeartbeating((sending) => {
        sending();
        env.cancel();
        return Promise.resolve('answered');
      }),
    );
    expect(answer).toBe('answered');
  });
});
