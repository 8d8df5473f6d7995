#!/usr/bin/env node
// The `retryq` command (`npx retryq …`). An installed package runs the built dist/cli.js on plain Node. In a clone
// of the repository (src/ next to this folder, tsx installed as a development dependency) it runs the TypeScript
// sources, so `npx retryq` there never runs a stale build.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
let cli;
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import(source.href);
} else {
  cli = await import('../dist/cli.js');
}
process.exit(await cli.main(process.argv.slice(2)));
