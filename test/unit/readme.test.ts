/**
 * The README is the newcomer's path and docs/ the reference: these tests keep both from drifting away from the
 * code. (The README's first intent is also run for real against `retryq dev`: test/e2e/first-intent.test.ts.)
 */
import { readFile, readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CONFIG_SETTINGS, defaultWorkerTuning, loadConfig } from '../../src/config.js';
import { DEMO_CREDENTIAL } from '../../src/demo/scenario.js';

const root = new URL('../../', import.meta.url);
const read = (p: string) => readFile(new URL(p, root), 'utf8');

/** The first fenced block of the given language after a heading. */
function blockAfter(page: string, heading: string, lang = 'ts'): string {
  const at = page.indexOf(heading);
  expect(at, `the page has the heading ${heading}`).toBeGreaterThanOrEqual(0);
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(page.slice(at));
  return m?.[1] ?? '';
}

describe('the docs pages', () => {
  it('show exactly the examples that the typecheck compiles (examples/*.ts)', async () => {
    expect(blockAfter(await read('docs/client-api.md'), '## Using retryq from your code')).toBe(
      await read('examples/submit-intent.ts'),
    );
    expect(blockAfter(await read('docs/testing.md'), '# Testing your own workflows')).toBe(
      await read('examples/test-own-workflow.ts'),
    );
  });

  it('document every configuration variable the code reads (docs/configuration.md)', async () => {
    const page = await read('docs/configuration.md');
    for (const { name } of CONFIG_SETTINGS)
      expect(page, `docs/configuration.md documents ${name}`).toContain(`\`${name}\``);
  });
});

describe('the README', () => {
  it("states the worker defaults that its sizing advice names (section 'At volume')", async () => {
    const readme = await read('README.md');
    const section = readme.slice(readme.indexOf('## At volume'), readme.indexOf('## Documentation'));
    const stated = (variable: string) =>
      Number(new RegExp('`' + variable + '` \\(default (\\d+)\\)').exec(section)?.[1]);
    expect(stated('RETRYQ_MAX_CACHED_WORKFLOWS')).toBe(defaultWorkerTuning.maxCachedWorkflows);
    expect(stated('RETRYQ_WAKE_UPS_PER_SECOND')).toBe(defaultWorkerTuning.wakeUpsPerSecond);
    expect(stated('RETRYQ_WORKFLOW_TASK_CONCURRENCY')).toBe(defaultWorkerTuning.workflowTaskConcurrency);
    // The variables it names are the ones the configuration reads.
    const names = CONFIG_SETTINGS.map((s) => s.name);
    for (const variable of section.match(/RETRYQ_[A-Z_]+/g) ?? []) expect(names).toContain(variable);
  });

  it('has a two-command quick start whose commands exist, and CI runs the same test command', async () => {
    const readme = await read('README.md');
    const quick = /## Quick start[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const commands = quick
      .split('\n')
      .map((l) => l.replace(/#.*/, '').trim())
      .filter(Boolean);
    expect(commands).toEqual(['npm run dev', 'npm test']);
    const pkg = JSON.parse(await read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts['dev']).toMatch(/\bdev\b/);
    expect(pkg.scripts['test']).toContain('vitest run');
    const ci = await read('.ci/run');
    expect(ci.split('\n').filter((l) => l.trim() && !l.startsWith('#'))).toContain('npm test');
  });

  it("points its first intent at what `npm run dev` really serves: the demo's credential, simulator and Temporal", async () => {
    const code = blockAfter(await read('README.md'), '## Your first intent', 'js');
    const defaults = loadConfig({});
    expect(code).toContain(`credential: '${DEMO_CREDENTIAL}'`);
    expect(code).toContain(`'http://127.0.0.1:${defaults.dev.simPort}'`);
    expect(code).toContain('RetryqClient.connect()');
    expect(defaults.temporal.address).toBe('127.0.0.1:7233');
  });

  it("shows the example application's files exactly as they are (its own test runs them: test/e2e/example-app.test.ts)", async () => {
    const readme = await read('README.md');
    const section = readme.slice(readme.indexOf('## Use it in your application'), readme.indexOf('## Guarantees'));
    const blocks = [...section.matchAll(/```(js|json)\n([\s\S]*?)```/g)];
    // Each code block follows the sentence that names its file: "… `src/workers.mjs`:" or "… `worker.mjs` runs …:".
    const shown = [...section.matchAll(/`([\w/.-]+\.(?:mjs|json))`[^`\n]*:\n\n```(?:js|json)\n([\s\S]*?)```/g)];
    expect(shown.map((m) => m[1])).toEqual([
      'credentials.json',
      'src/workers.mjs',
      'worker.mjs',
      'src/charge.mjs',
      'test/charge.test.mjs',
    ]);
    expect(shown).toHaveLength(blocks.length);
    for (const [, file, code] of shown) expect(code, file).toBe(await read(`examples/app/${file}`));
  });

  it('stays a short path: what, two commands, a first intent, guarantees, the figures at volume, links', async () => {
    const readme = await read('README.md');
    const headings = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual([
      'Quick start',
      'Your first intent',
      'Use it in your application',
      'Guarantees',
      'At volume',
      'Documentation',
    ]);
  });

  it('draws every room of src/ in the development page', async () => {
    const drawn = /```text\n([\s\S]*?)```/.exec(await read('docs/development.md'))?.[1] ?? '';
    // The rooms themselves, above the layers (test/unit/layers.test.ts checks those).
    const picture = drawn.split(/^layers of src\//m)[0] ?? '';
    expect(picture.length).toBeLessThan(drawn.length);
    for (const entry of await readdir(new URL('src/', root), { withFileTypes: true })) {
      const room = `src/${entry.name}${entry.isDirectory() ? '/' : ''}`;
      expect(picture, `the room picture names ${room}`).toContain(room);
    }
  });
});
