/**
 * The example application (`examples/app`, the README's "Use it in your application") as a user gets it: copied to a
 * folder outside the repository, with the packed retryq installed into it (test/support/packed-package.ts), then its
 * own `npm test` — plain `node --test`, no tsx, no TypeScript — runs its time-skipping test: its own workers with its
 * own credential file, an intent submitted by its own code, a provider that answers 429 with `Retry-After: 3600` and
 * then succeeds.
 */
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installPacked, npm, packRetryq, repo, sh } from '../support/packed-package.js';

let tmp: string;
let app: string;

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'retryq-example-app-'));
  app = path.join(tmp, 'app');
  // The folder as the repository holds it; a node_modules someone installed inside it is not part of the example.
  await cp(path.join(repo, 'examples', 'app'), app, {
    recursive: true,
    filter: (src) => !src.split(path.sep).includes('node_modules') && !src.endsWith('package-lock.json'),
  });
  await installPacked(app, await packRetryq(tmp));
}, 300_000);

afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('the example application, installed from the packed tarball outside the repository', () => {
  it('is a plain-Node application: no TypeScript files, retryq from the tarball', async () => {
    const files = await readdir(app, { recursive: true });
    expect(files.filter((f) => !f.startsWith('node_modules') && /\.[mc]?tsx?$/.test(f))).toEqual([]);
    expect(files).toContain(path.join('node_modules', 'retryq', 'dist', 'index.js'));
    expect(files).not.toContain(path.join('node_modules', 'tsx'));
  });

  it("passes its own `npm test`: a charge rate-limited for an hour succeeds an hour later, in the test server's time", async () => {
    const { stdout } = await sh(npm, ['test'], app).catch((err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`the example's npm test failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
    });
    expect(stdout).toMatch(/^ok 1 - a charge rate-limited for an hour/m);
    expect(stdout).toMatch(/^# pass 1$/m);
    expect(stdout).toMatch(/^# fail 0$/m);
    // The test server came from retryq's per-user binaries folder: nothing of it in the application's folder.
    expect((await readdir(app)).filter((f) => /^\.tools$|venv/.test(f))).toEqual([]);
  }, 240_000);
});
