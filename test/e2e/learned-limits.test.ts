/**
 * Limits the provider states in its headers, on a real Temporal dev server with the provider simulator: when an
 * answer says no request is left, load control closes the credential's gate until the reset, before a 429 comes, and
 * paces by the quota the provider stated (below the configured budget). Real time: a few seconds.
 */
import { describe, expect, it, vi } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { credentialsReport, formatCredentials } from '../../src/load-control/credentials-report.js';
import { credentialStateQuery, credentialWorkflowId } from '../../src/workflows/index.js';
import type { IntentStatus } from '../../src/intent.js';
import { CREDENTIAL, ms, testCredential, useIntentHarness } from '../support/intent-harness.js';

const h = useIntentHarness('dev-server');
vi.setConfig({ testTimeout: 120_000 });

const heldByGate = (s: IntentStatus) => s.phase === 'waiting' && s.held?.reason === 'rate_limited';

describe('when the provider states its limit in headers (IETF RateLimit, sliding window)', () => {
  it('closes the gate when an answer says none are left, before any 429, and paces by the stated quota', async () => {
    // 3 writes per sliding minute, announced as `"default";q=3;w=60`; retryq is configured far above that.
    const t = await h.setup({ rateLimitPerMinute: 3, rateLimit: { algorithm: 'sliding-window', headers: 'ietf' } });
    await t.run(async () => {
      const first = Array.from({ length: 3 }, () => t.intent({ idempotencyKey: t.newKey('order') }));
      for (const input of first) await t.submit(input);
      for (const input of first) expect((await t.client.result(input.idempotencyKey)).phase).toBe('succeeded');

      // The third answer said `r=0`: the next intent is held by the credential's gate, nothing is sent.
      const next = t.intent({ idempotencyKey: t.newKey('next') });
      await t.submit(next);
      const held = await t.waitForStatus(next.idempotencyKey, heldByGate, 'held by the learned gate');
      expect(held.attempts).toBe(0);
      expect(held.held?.why).toMatch(
        /^learned from RateLimit-Policy: 3 per 60 s \("default"\), 0 remaining, resets in/,
      );
      // Until the reset: the oldest of the three writes leaves the window about a minute after it was sent.
      const firstSentAt = Math.min(...t.sim.operations().map((o) => Date.parse(o.createdAt)));
      expect(ms(held.held?.until)).toBeGreaterThanOrEqual(firstSentAt + 55_000);
      expect(t.dispatches(next.idempotencyKey)).toHaveLength(0);
      expect(t.sim.metrics().totals.rateLimited).toBe(0);
      expect(t.sim.metrics().totals.writes).toBe(3);

      // The UI sentence names where the limit came from.
      const metadata = await t.env.client.workflow
        .getHandle(workflowIdOf(next.idempotencyKey))
        .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      expect(metadata.currentDetails).toContain('learned from RateLimit-Policy: 3 per 60 s');

      // The entity paces at the stated quota, and says where it came from.
      const state = await t.env.client.workflow
        .getHandle(credentialWorkflowId(CREDENTIAL, t.prefix))
        .query(credentialStateQuery);
      expect(state.learned?.budget.totalPerMinute).toBe(3);
      expect(state.learned?.reason).toContain('learned from RateLimit-Policy: 3 per 60 s');
      expect(state.budget.totalPerMinute).toBe(600_000);

      const rows = await credentialsReport({
        client: t.env.client,
        prefix: t.prefix,
        credentials: [testCredential()],
        discover: false,
      });
      expect(rows[0]?.learned?.budget.totalPerMinute).toBe(3);
      expect(formatCredentials(rows)).toMatch(/paced at +3\/min until .* \(learned from RateLimit-Policy: 3 per 60 s/);
      expect(formatCredentials(rows)).toMatch(/rate limited until .* \(learned from RateLimit-Policy: .*0 remaining/);
    });
  });
});
