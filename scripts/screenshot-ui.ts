/**
 * Renders the docs' pictures: runs `retryq dev` with its full demo, then with headless Chromium the demo's terminal
 * summary (terminal-summary.png), the workflows list filtered by retryq's search attributes (ui-list-waiting.png)
 * and a waiting intent's User Metadata tab (ui-intent-details.png).
 *
 * Usage: `npm run screenshot:ui -- [--out <dir>] [--demo-args='<retryq dev demo flags>']` (default: docs/, the
 * default demo).
 */
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Page } from 'playwright-core';
import { RetryqClient } from '../src/client.js';
import { loadConfig } from '../src/config.js';
import { DEMO_CREDENTIAL } from '../src/demo/scenario.js';
import { connectClient } from '../src/temporal/connect.js';
import { allText, demoSummary, startDevUi, submitFarIntent } from './support/dev-ui.js';

const root = new URL('../', import.meta.url).pathname;
const { values } = parseArgs({ options: { out: { type: 'string' }, 'demo-args': { type: 'string' } } });
const out = path.resolve(root, values.out ?? 'docs');
await mkdir(out, { recursive: true });

/** Resolves once `check` holds, polling every 200 ms; throws after `timeoutMs`. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`screenshot:ui: ${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const ui = await startDevUi((values['demo-args'] ?? '').split(/\s+/).filter(Boolean), 600_000);
try {
  // The terminal summary, as a picture for the README.
  const terminal = await ui.browser.newPage({ viewport: { width: 1100, height: 100 } });
  const text = `$ npm run dev\n…\n${demoSummary(ui.output()).trimEnd()}`.replace(
    /[&<>]/g,
    (c) => `&#${c.charCodeAt(0)};`,
  );
  await terminal.setContent(
    `<body style="margin:0;background:#1e1e1e"><pre style="margin:0;padding:18px;color:#e8e8e8;font:13px/1.35 monospace">${text}</pre></body>`,
  );
  await terminal.screenshot({ path: path.join(out, 'terminal-summary.png'), fullPage: true });
  await terminal.close();

  const simUrl = ui.simUrl();
  const key = `ui-far-${randomUUID().slice(0, 8)}`;
  const { client, close } = await connectClient(loadConfig(ui.env).temporal);
  try {
    const rq = new RetryqClient({ client });
    await submitFarIntent(rq, simUrl, key);
    await until(`intent ${key} waiting`, async () => (await rq.status(key)).phase === 'waiting');
  } finally {
    await close();
  }
  const page: Page = await ui.browser.newPage({ viewport: { width: 1400, height: 900 } });
  const query = `RetryPhase="waiting" AND Credential="${DEMO_CREDENTIAL}"`;
  await page.goto(`http://localhost:${ui.uiPort}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
  await page.getByText(`intent:${key}`).first().waitFor({ timeout: 30_000 });
  await page.screenshot({ path: path.join(out, 'ui-list-waiting.png') });
  await page
    .getByRole('link', { name: `intent:${key}` })
    .first()
    .click();
  await page.getByText('User Metadata', { exact: true }).first().click();
  await until('the User Metadata tab', async () => /Waiting for provider until/.test(await allText(page)));
  await page.screenshot({ path: path.join(out, 'ui-intent-details.png') });
  await page.close();
  console.log(`screenshot:ui: wrote terminal-summary.png, ui-list-waiting.png, ui-intent-details.png to ${out}`);
} finally {
  await ui.stop();
}
