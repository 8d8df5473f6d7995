/**
 * The workers' load-control metrics: what Prometheus scrapes from `/metrics` (a real HTTP server on port 0).
 */
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { LoadMetrics, serveMetrics } from '../../../src/load-control/metrics.js';
import { splitBudget } from '../../../src/policy/index.js';

describe('load-control metrics', () => {
  it('serves the budget split, the gate with its opening time, blocks, sends and holds per credential', async () => {
    const metrics = new LoadMetrics();
    metrics.budget('acme-prod', splitBudget(60, 0.2));
    metrics.view('acme-prod', { dispatch: 1_900_000_000_000, inspect: 0 }, undefined, 1_800_000_000_000);
    metrics.granted('acme-prod', 'dispatch');
    metrics.held('acme-prod', 'dispatch', 'rate_limited');
    metrics.held('acme-prod', 'dispatch', 'rate_limited');
    metrics.rateLimited('acme-prod', 'dispatch');
    const server = await serveMetrics(metrics, 0, '127.0.0.1');
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/plain');
      const text = await res.text();
      for (const line of [
        'retryq_credential_budget_per_minute{credential="acme-prod",share="total"} 60',
        'retryq_credential_budget_per_minute{credential="acme-prod",share="dispatch"} 48',
        'retryq_credential_budget_per_minute{credential="acme-prod",share="inspect"} 12',
        'retryq_credential_gate_closed{credential="acme-prod",kind="dispatch"} 1',
        'retryq_credential_gate_closed{credential="acme-prod",kind="inspect"} 0',
        'retryq_credential_gate_open_at_seconds{credential="acme-prod",kind="dispatch"} 1900000000',
        'retryq_credential_blocked{credential="acme-prod"} 0',
        'retryq_credential_sends_total{credential="acme-prod",kind="dispatch"} 1',
        'retryq_credential_held_total{credential="acme-prod",kind="dispatch",reason="rate_limited"} 2',
        'retryq_credential_rate_limited_total{credential="acme-prod",kind="dispatch"} 1',
      ])
        expect(text).toContain(line);
      metrics.view('acme-prod', { dispatch: 0, inspect: 0 }, { reason: 'HTTP 402', since: '' }, 1_800_000_000_000);
      const after = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(after).toContain('retryq_credential_gate_closed{credential="acme-prod",kind="dispatch"} 0');
      expect(after).toContain('retryq_credential_blocked{credential="acme-prod"} 1');
      expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
