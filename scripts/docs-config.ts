/**
 * `npm run docs:config`: writes the table of environment variables into docs/configuration.md, between the markers
 * `<!-- config-table:start -->` and `<!-- config-table:end -->`, from `CONFIG_SETTINGS` (src/config.ts), formatted
 * as Prettier formats the page. test/unit/config-docs.test.ts fails when the page and the table differ.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as prettier from 'prettier';
import { CONFIG_SETTINGS } from '../src/config.js';
import { renderSettingsTable } from '../src/settings.js';

export const configPage = path.resolve(import.meta.dirname, '../docs/configuration.md');
const start = '<!-- config-table:start -->';
const end = '<!-- config-table:end -->';

/** The page with its table generated from the code, formatted. Throws when the page lacks the markers. */
export async function withConfigTable(page: string): Promise<string> {
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${configPage} must hold ${start} … ${end}`);
  const generated =
    `${start}\n<!-- Generated from CONFIG_SETTINGS in src/config.ts by \`npm run docs:config\`: edit the code, not this table. -->\n\n` +
    `${renderSettingsTable(CONFIG_SETTINGS)}\n\n`;
  const options = (await prettier.resolveConfig(configPage)) ?? {};
  return prettier.format(page.slice(0, from) + generated + page.slice(to), { ...options, filepath: configPage });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const page = await readFile(configPage, 'utf8');
  const next = await withConfigTable(page);
  if (next !== page) await writeFile(configPage, next);
  console.log(next === page ? 'docs/configuration.md is up to date' : 'docs/configuration.md: table regenerated');
}
