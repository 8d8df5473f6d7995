/**
 * The Temporal Web UI as the window onto every intent: runs the main job (`retryq dev` with its demo), then
 * drives real Chromium against the UI the dev server serves. The docs' pictures are rendered by
 * `npm run screenshot:ui` (scripts/screenshot-ui.ts), not here.
 */
import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { allText, startDevUi, submitFarIntent } from '../../scripts/support/dev-ui.js';
import type { DevUi } from '../../scripts/support/dev-ui.js';
import { RetryqClient } from '../../src/client.js';
import { loadConfig } from '../../src/config.js';
import { DEMO_CREDENTIAL } from '../../src/demo/scenario.js';
import { connectClient } from '../../src/temporal/connect.js';

let ui: DevUi;
let output = '';
let uiPort: number;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  // A quick demo by default; another with e.g. RETRYQ_UI_DEMO_ARGS='--demo-charges 18'.
  const demoArgs = (process.env['RETRYQ_UI_DEMO_ARGS'] ?? '--demo-charges 3 --demo-rate-limit 600').split(/\s+/);
  ui = await startDevUi(demoArgs.filter(Boolean));
  output = ui.output();
  uiPort = ui.uiPort;
  env = ui.env;
});

afterAll(async () => {
  await ui?.stop();
});

/** The page's text (frames included) once `ready` shows in it; the last text seen in the error otherwise. */
function textOnceShown(page: Page, ready: RegExp, where: string, timeout = 20_000): Promise<string> {
  return vi.waitFor(
    async () => {
      const text = await allText(page);
      if (!ready.test(text)) throw new Error(`${String(ready)} never showed on ${where}; page text:\n${text}`);
      return text;
    },
    { timeout, interval: 200 },
  );
}

/** Clicks a tab of the workflow page and returns the page text once `ready` shows. */
async function openTab(page: Page, name: string, ready: RegExp): Promise<string> {
  await page.getByText(name, { exact: true }).first().click();
  return textOnceShown(page, ready, `the ${name} tab`);
}

describe('the demo of the main job', () => {
  it('completes with zero duplicate side effects and a summary per intent', () => {
    const [, intents, succeeded, failed, expired] =
      /Demo finished in \d+ s: (\d+) intents — (\d+) succeeded, (\d+) failed, (\d+) expired, 0 cancelled\./.exec(
        output,
      ) ?? [];
    // Everything succeeds but the permission error (failed) and the server delay past the deadline (expired).
    expect([Number(succeeded), Number(failed), Number(expired)]).toEqual([Number(intents) - 2, 1, 1]);
    expect(output).toMatch(/,\s+0\s+duplicate\s+side\s+effects\./);
    // The lost answer is settled by the simulator's signed webhook, which arrives while the attempt hangs: no inspection.
    expect(output).toMatch(/-lost-1 +succeeded +\d+ +0 +resolved by webhook \(no inspection\)/);
    expect(output).toMatch(
      /Webhooks: \d+ deliveries[^]*1\s+intent\s+resolved\s+by\s+webhook;\s+\d+\s+forged\s+or\s+stale\s+refused\s+\(0\s+accepted\)/,
    );
    expect(output).toMatch(/-perm-1 +failed +\d+ +0 +HTTP 403 permission_denied/);
    // The summary's outcome column is cut to fit 100 characters.
    expect(output).toMatch(/-far-1 +expired .*past the deadli/);
  });
});

describe('the Temporal UI served by retryq dev', () => {
  it('finds a waiting intent by its search attributes and shows why and until when it waits', async () => {
    // A live intent the provider asks to wait an hour for (submitFarIntent).
    const simUrl = /Simulated provider: (http:\/\/[0-9.:]+)/.exec(output)?.[1];
    expect(simUrl).toBeDefined();
    const key = `ui-far-${randomUUID().slice(0, 8)}`;
    const { client, close } = await connectClient(loadConfig(env).temporal);
    const rq = new RetryqClient({ client });
    await submitFarIntent(rq, simUrl!, key);
    try {
      await expect.poll(async () => (await rq.status(key)).phase, { timeout: 20_000, interval: 200 }).toBe('waiting');
    } finally {
      await close();
    }

    const page = await ui.browser.newPage({ viewport: { width: 1400, height: 900 } });
    const query = `RetryPhase="waiting" AND Credential="${DEMO_CREDENTIAL}"`;
    await page.goto(`http://localhost:${uiPort}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
    const row = page.getByText(`intent:${key}`).first();
    await row.waitFor({ timeout: 30_000 });
    const link = page.getByRole('link', { name: `intent:${key}` }).first();
    await link.click();
    await page.getByText('User Metadata', { exact: true }).first().waitFor();

    const metadata = await openTab(page, 'User Metadata', /Waiting for provider until/);
    expect(metadata).toContain(`key ${key}`);
    // The UI's markdown renderer typesets "1/10" with a fraction slash (U+2044). A wait that ends on another UTC day
    // (this test run after 23:00 UTC) names the date before the time.
    expect(metadata).toMatch(
      /Waiting for provider until (?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC \(Retry-After 3600 s, attempt 1[/\u2044]10\)/,
    );

    const attributes = await openTab(page, 'Search Attributes', /RetryPhase/);
    expect(attributes).toContain('"RetryPhase": "waiting"');
    expect(attributes).toContain(`"Credential": "${DEMO_CREDENTIAL}"`);
    expect(attributes).toContain('"LastErrorCode": "maintenance"');
    expect(attributes).toMatch(/"NextAttemptAt": "\d{4}-\d\d-\d\dT/);
    expect(attributes).not.toContain('sk_');
    await page.close();
  });
});

describe('failures and stalls in the Temporal UI', () => {
  /** Opens an intent's workflow page and returns its text once `ready` shows. */
  async function workflowPage(page: Page, key: string, ready: RegExp): Promise<string> {
    await page.goto(`http://localhost:${uiPort}/namespaces/default/workflows/${encodeURIComponent(`intent:${key}`)}`);
    return textOnceShown(page, ready, `the page of intent:${key}`);
  }

  /** No line of a stack trace (`at fn (file:line)`), and no SDK-internal wording. */
  function expectNoCrashLook(text: string): void {
    expect(text).not.toMatch(/^\s*at \S+ \(?\S+:\d+:\d+\)?$/m);
    expect(text).not.toMatch(/workflow-bundle|ApplicationFailure:|node_modules/);
  }

  it("shows a failed and an expired intent's failure as a sentence first, the outcome in its details", async () => {
    const failedKey = /(demo-[\w-]+-perm-1)\b/.exec(output)?.[1];
    const expiredKey = /(demo-[\w-]+-far-1)\b/.exec(output)?.[1];
    expect(failedKey && expiredKey, output).toBeTruthy();
    const page = await ui.browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const failed = await workflowPage(page, failedKey!, /Failed: POST \S+\/v1\/charges was not delivered/);
    expect(failed).toMatch(
      /Failed: POST \S+ was not delivered \(permanent failure .*HTTP 403 permission_denied\)\. No reservation/,
    );
    expect(failed).toContain('No reservation is left to reconcile.');
    expect(failed).toContain('"phase": "failed"'); // the outcome, in the failure's details
    expectNoCrashLook(failed);
    const expired = await workflowPage(page, expiredKey!, /Expired: POST \S+ was not delivered by the deadline/);
    expect(expired).toContain('past the deadline');
    expect(expired).toContain('"phase": "expired"');
    expectNoCrashLook(expired);
    await page.close();
  });

  it('shows a stalled dispatch in the details and finds it by LastErrorCode; a cancel ends it as a sentence', async () => {
    const simUrl = /Simulated provider: (http:\/\/[0-9.:]+)/.exec(output)?.[1];
    const key = `ui-stall-${randomUUID().slice(0, 8)}`;
    const { client, close } = await connectClient(loadConfig(env).temporal);
    try {
      const rq = new RetryqClient({ client, stalledDispatchAfterMs: 1000 });
      await rq.submit(
        {
          idempotencyKey: key,
          credential: 'nobody-serves-this',
          action: { method: 'POST', url: `${simUrl}/v1/charges`, body: { amount: 5 } },
          inspection: { url: `${simUrl}/v1/operations/{idempotencyKey}` },
          deadline: '3h',
        },
        { requireServedCredential: false },
      );
      await expect.poll(async () => (await rq.status(key)).stalled, { timeout: 20_000, interval: 200 }).toBeDefined();

      const page = await ui.browser.newPage({ viewport: { width: 1400, height: 900 } });
      const query = 'LastErrorCode="no_worker" AND RetryPhase="dispatching"';
      await page.goto(`http://localhost:${uiPort}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
      await page.getByText(`intent:${key}`).first().waitFor({ timeout: 30_000 });
      await page
        .getByRole('link', { name: `intent:${key}` })
        .first()
        .click();
      await page.getByText('User Metadata', { exact: true }).first().waitFor();
      const metadata = await openTab(page, 'User Metadata', /No worker has served credential/);
      expect(metadata).toMatch(
        /No worker has served credential nobody-serves-this since (?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC/,
      );

      await rq.cancel(key, 'no worker will ever serve it');
      expect((await rq.result(key)).phase).toBe('cancelled');
      const cancelled = await workflowPage(page, key, /Cancelled: POST \S+ will not be sent again/);
      expect(cancelled).toContain('no worker will ever serve it');
      expect(cancelled).toContain('No reservation is left to reconcile.');
      expectNoCrashLook(cancelled);
      await page.close();
    } finally {
      await close();
    }
  });
});

describe('the workers metrics of retryq dev', () => {
  it("serve retryq's counters and the SDK's metrics from the demo on RETRYQ_METRICS_PORT", async () => {
    const text = await (await fetch(`http://127.0.0.1:${env['RETRYQ_METRICS_PORT']}/metrics`)).text();
    const sample = (name: string, labels = ''): string | undefined =>
      text.split('\n').find((l) => l.startsWith(name) && l.includes(labels));
    const shown: Record<string, string | undefined> = {
      attempts: sample('retryq_attempts_total', 'decision="success"'),
      rateLimited: sample('retryq_rate_limited_answers_total'),
      inspections: sample('retryq_inspections_total'),
      ended: sample('retryq_intents_ended_total', 'phase="succeeded"'),
      held: sample('retryq_dispatches_held_total'),
      stalled: sample('retryq_dispatches_stalled_total'),
      sdkWorkflows: sample('temporal_workflow_completed_total'),
      sdkActivityLatency: sample('temporal_activity_execution_latency_seconds_count'),
      sdkSlots: sample('temporal_worker_task_slots_available'),
      loadControlSends: sample('retryq_credential_sends_total'),
    };
    console.log(`demo metrics samples: ${JSON.stringify(shown, null, 2)}`);
    for (const key of ['attempts', 'inspections', 'ended', 'sdkWorkflows', 'sdkActivityLatency', 'loadControlSends'])
      expect(shown[key], key).toBeDefined();
  });
});
