/**
 * `retryq dev` with its demo and headless Chromium against the Temporal UI it serves: shared by the UI test
 * (test/ui) and the script that renders the docs' pictures (`npm run screenshot:ui`). Free ports, a temporary data
 * dir; `stop()` ends both and removes the data dir.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, Page } from 'playwright-core';
import type { RetryqClient } from '../../src/client.js';
import { DEMO_CREDENTIAL } from '../../src/demo/scenario.js';
import { freePort } from '../../src/temporal/server-process.js';

const root = new URL('../../', import.meta.url).pathname;
const CHROMIUM = '/usr/bin/chromium';

export interface DevUi {
  /** The environment `retryq dev` runs with (its ports, its data dir). */
  env: NodeJS.ProcessEnv;
  uiPort: number;
  browser: Browser;
  /** Everything `retryq dev` printed so far. */
  output(): string;
  /** The simulated provider's base URL, as `retryq dev` printed it. */
  simUrl(): string;
  stop(): Promise<void>;
}

/**
 * Starts `retryq dev` with `demoArgs` and resolves once its demo finished and it keeps running (within
 * `readyTimeoutMs`), with Chromium launched.
 */
export async function startDevUi(demoArgs: string[], readyTimeoutMs = 240_000): Promise<DevUi> {
  if (!existsSync(CHROMIUM)) throw new Error(`Debian chromium must be installed at ${CHROMIUM} (npm test installs it)`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'retryq-ui-'));
  const uiPort = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    RETRYQ_DATA_DIR: dataDir,
    RETRYQ_DEV_PORT: String(await freePort()),
    RETRYQ_UI_PORT: String(uiPort),
    RETRYQ_DEV_SIM_PORT: String(await freePort()),
    RETRYQ_METRICS_PORT: String(await freePort()),
  };
  delete env['TEMPORAL_ADDRESS'];
  const dev = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'dev', ...demoArgs], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const ready = 'retryq keeps running until Ctrl-C';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => fail(`within ${readyTimeoutMs} ms`), readyTimeoutMs);
    const onData = (d: Buffer) => {
      output += d.toString();
      if (!output.includes(ready)) return;
      clearTimeout(timer);
      dev.off('exit', onExit);
      resolve();
    };
    const onExit = () => fail('before it exited');
    function fail(when: string) {
      clearTimeout(timer);
      dev.kill('SIGKILL');
      reject(new Error(`retryq dev did not print ${JSON.stringify(ready)} ${when}; output:\n${output}`));
    }
    dev.stdout.on('data', onData);
    dev.stderr.on('data', onData);
    dev.once('exit', onExit);
  });
  let browser: Browser;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--no-first-run',
        '--disable-sync',
      ],
    });
  } catch (err) {
    dev.kill('SIGKILL');
    throw err;
  }
  return {
    env,
    uiPort,
    browser,
    output: () => output,
    simUrl() {
      const url = /Simulated provider: (http:\/\/[0-9.:]+)/.exec(output)?.[1];
      if (!url) throw new Error(`retryq dev did not print the simulated provider's URL:\n${output}`);
      return url;
    },
    async stop() {
      await browser.close();
      if (dev.exitCode === null && dev.signalCode === null) {
        const exited = new Promise((r) => dev.once('exit', r));
        dev.kill('SIGTERM');
        await exited;
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** The page's text including its frames (the UI renders summary and details markdown in sandboxed iframes). */
export async function allText(page: Page): Promise<string> {
  const parts = await Promise.all(
    page.frames().map((f) =>
      f
        .locator('body')
        .innerText()
        .catch(() => ''),
    ),
  );
  return parts.join('\n');
}

/** The demo's closing summary as `retryq dev` printed it (from "Demo finished" up to the "Open http" line). */
export function demoSummary(output: string): string {
  return output.slice(output.indexOf('Demo finished'), output.indexOf('Open http'));
}

/**
 * Submits an intent the demo's provider asks to wait an hour for (its '*-far-*' rule: a 503 with Retry-After 3600;
 * a 429 would close the whole demo credential's gate for the hour), so the UI has a waiting intent to show.
 */
export async function submitFarIntent(rq: RetryqClient, simUrl: string, key: string): Promise<void> {
  await rq.submit({
    idempotencyKey: key,
    credential: DEMO_CREDENTIAL,
    action: { method: 'POST', url: `${simUrl}/v1/charges`, body: { amount: 990, currency: 'eur' } },
    inspection: { url: `${simUrl}/v1/operations/{idempotencyKey}` },
    deadline: '3h',
  });
}
