/**
 * The README is the user's manual: these tests keep it from drifting away from the code.
 */
import { readFile, readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../../src/config.js';

const root = new URL('../../', import.meta.url);
const read = (p: string) => readFile(new URL(p, root), 'utf8');

/** The first ```ts block after a heading. */
function blockAfter(readme: string, heading: string): string {
  const at = readme.indexOf(heading);
  expect(at, `README has the heading ${heading}`).toBeGreaterThanOrEqual(0);
  const m = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  return m?.[1] ?? '';
}

describe('the README', () => {
  it('shows exactly the examples that the typecheck compiles (examples/*.ts)', async () => {
    const readme = await read('README.md');
    expect(blockAfter(readme, '## Using retryq from your code')).toBe(await read('examples/submit-intent.ts'));
    expect(blockAfter(readme, '## Testing your own workflows')).toBe(await read('examples/test-own-workflow.ts'));
  });

  it('documents every configuration variable the code reads', async () => {
    const readme = await read('README.md');
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('## The Temporal UI'));
    for (const [names] of CONFIG_VARIABLES)
      for (const name of names.split(', '))
        expect(section, `README documents ${name}`).toContain(`\`${name.replace('_*', '_*')}\``);
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
    expect(pkg.scripts['dev']).toContain('src/cli.ts dev');
    expect(pkg.scripts['test']).toContain('vitest run');
    const ci = await read('.ci/run');
    expect(ci.split('\n').filter((l) => l.trim() && !l.startsWith('#'))).toContain('npm test');
  });

  it('draws every room of src/ in the Development section', async () => {
    const readme = await read('README.md');
    const at = readme.indexOf('## Development');
    const picture = /```text\n([\s\S]*?)```/.exec(readme.slice(at))?.[1] ?? '';
    for (const entry of await readdir(new URL('src/', root), { withFileTypes: true })) {
      const room = `src/${entry.name}${entry.isDirectory() ? '/' : ''}`;
      expect(picture, `the room picture names ${room}`).toContain(room);
    }
  });
});
