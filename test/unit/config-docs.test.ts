/**
 * The configuration table in code (CONFIG_SETTINGS) is the one source of every variable's name, default and doc:
 * docs/configuration.md's table is generated from it (`npm run docs:config`), and these tests fail when the page,
 * the table and the code that reads the environment drift apart.
 */
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configPage, withConfigTable } from '../../scripts/docs-config.js';
import { CONFIG_SETTINGS, defaultWorkerTuning, loadConfig, settings } from '../../src/config.js';
import { defaultOf } from '../../src/settings.js';
import { webhookSettings } from '../../src/webhook-config.js';

const root = path.resolve(import.meta.dirname, '../..');

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) =>
      e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : Promise.resolve([path.join(dir, e.name)]),
    ),
  );
  return nested.flat().filter((f) => f.endsWith('.ts'));
}

describe('the configuration table', () => {
  it('is what docs/configuration.md shows: regenerating the page changes nothing (run `npm run docs:config`)', async () => {
    const page = await readFile(configPage, 'utf8');
    expect(await withConfigTable(page)).toBe(page);
  });

  it('has one row per variable, and the page one table row per variable', async () => {
    const names = CONFIG_SETTINGS.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    const page = await readFile(configPage, 'utf8');
    for (const name of names) {
      const cell = `| \`${name}\``;
      const rows = page.split('\n').filter((line) => line.startsWith(cell) && /^ *\|/.test(line.slice(cell.length)));
      expect(rows, `docs/configuration.md has one row for ${name}`).toHaveLength(1);
    }
  });

  it('names every environment variable the source reads', async () => {
    const names = new Set(CONFIG_SETTINGS.map((s) => s.name));
    const read = new Set<string>();
    for (const file of await sourceFiles(path.join(root, 'src'))) {
      const code = await readFile(file, 'utf8');
      for (const m of code.matchAll(/env\[\s*'((?:RETRYQ|TEMPORAL)_[A-Z0-9_]+)'\s*\]/g)) read.add(m[1]!);
    }
    expect(read.size).toBeGreaterThan(3);
    for (const name of read) expect(names, `CONFIG_SETTINGS declares ${name}`).toContain(name);
  });

  it('gives every row a default its own schema accepts, and loadConfig those defaults when nothing is set', () => {
    for (const row of CONFIG_SETTINGS) expect(() => defaultOf(row), row.name).not.toThrow();
    const config = loadConfig({});
    expect(config.worker).toEqual(defaultWorkerTuning);
    expect(config.intents.defaultDeadlineMs).toBe(defaultOf(settings.defaultDeadline));
    expect(config.dev.port).toBe(defaultOf(settings.devPort));
    expect(config.webhooks.maxBodyBytes).toBe(defaultOf(webhookSettings.maxBody));
    expect(config.webhooks.port).toBe(8788);
    expect(config.temporal.address).toBe('127.0.0.1:7233');
  });

  it('documents TEMPORAL_ADDRESS unset as 127.0.0.1:7233, as the code connects', () => {
    const row = CONFIG_SETTINGS.find((s) => s.name === 'TEMPORAL_ADDRESS');
    expect(row?.unset).toContain(`\`${loadConfig({}).temporal.address}\``);
  });
});
