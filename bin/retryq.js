#!/usr/bin/env node
// The `retryq` command (`npx retryq …`). An installed package runs the built dist/cli.js on plain Node. In a clone
// of the repository (src/ next to this folder, tsx installed as a development dependency) it runs the TypeScript
// sources, so `npx retryq` there never runs a stale build.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
const built = new URL('../dist/cli.js', import.meta.url);
let cli;
if (existsSync(source)) {
  let tsx;
  try {
    tsx = await import('tsx/esm/api');
  } catch {
    process.stderr.write(
      'retryq: this is a clone of the retryq repository without its development dependencies. ' +
        'Run `npm ci` (or `npm run dev`, which installs them) and try again.\n',
    );
    process.exit(1);
  }
  tsx.register();
  cli = await import(source.href);
} else if (existsSync(built)) {
  cli = await import(built.href);
} else {
  process.stderr.write('retryq: this package has no dist/ folder. Reinstall it, or run `npm run build` in a clone.\n');
  process.exit(1);
}
process.exit(await cli.main(process.argv.slice(2)));
