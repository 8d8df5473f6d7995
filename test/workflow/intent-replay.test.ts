/**
 * Replay (determinism guard): the recorded intent histories in test/workflow/histories/*.json replay against the
 * current workflow bundle without non-determinism errors. A change to src/workflows that alters the commands an
 * old history recorded fails here; re-record (`npm run record-histories`) only for a deliberate, versioned change.
 * Replaying JSON histories needs exactly one copy of protobufjs in the npm tree (package.json `overrides`).
 */
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import type { History } from '@temporalio/common/lib/proto-utils.js';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { cachedWorkflowBundle } from '../../src/testing.js';
import { projectRoot } from '../../src/temporal/binaries.js';
import { intentWorkflowBundle } from '../../src/worker.js';
import { historyScenarios } from '../support/history-recording.js';
import { SIM_SECRET } from '../support/intent-credential.js';

const historiesDir = fileURLToPath(new URL('./histories', import.meta.url));

/** Every installed copy of a package below node_modules (nested copies included), as paths. */
async function installedCopies(name: string, dir = path.join(projectRoot, 'node_modules')): Promise<string[]> {
  const found: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isDirectory() || e.name.startsWith('.')) continue;
    const full = path.join(dir, e.name);
    if (e.name.startsWith('@')) {
      for (const scoped of await readdir(full, { withFileTypes: true }).catch(() => []))
        if (scoped.isDirectory()) found.push(...(await nested(name, path.join(full, scoped.name))));
      continue;
    }
    if (e.name === name) found.push(full);
    found.push(...(await nested(name, full)));
  }
  return found;
}

async function nested(name: string, packageDir: string): Promise<string[]> {
  const inner = path.join(packageDir, 'node_modules');
  return (await readdir(inner).catch(() => null)) ? installedCopies(name, inner) : [];
}

/** Reads a recorded history; a parse failure says what usually causes it. */
async function loadHistory(file: string): Promise<History> {
  const text = await readFile(path.join(historiesDir, file), 'utf8');
  try {
    return historyFromJSON(JSON.parse(text));
  } catch (err) {
    throw new Error(
      `historyFromJSON could not parse ${file}: ${(err as Error).message}. ` +
        'This usually means npm installed several copies of protobufjs (run `npm ls protobufjs`; package.json ' +
        '`overrides` must pin one), or the file is not a history written by `npm run record-histories`.',
      { cause: err },
    );
  }
}

async function historyFiles(): Promise<string[]> {
  return (await readdir(historiesDir)).filter((f) => f.endsWith('.json')).sort();
}

describe('the npm tree', () => {
  it('holds exactly one copy of protobufjs (JSON histories cannot be parsed otherwise)', async () => {
    const copies = await installedCopies('protobufjs');
    expect(copies.map((c) => path.relative(projectRoot, c))).toEqual(['node_modules/protobufjs']);
  });
});

describe('recorded intent histories', () => {
  it('exist for every recorded scenario and parse', async () => {
    const files = await historyFiles();
    expect(files).toEqual(historyScenarios.map((s) => `${s.name}.json`).sort());
    for (const file of files) {
      const history = await loadHistory(file);
      expect(history.events?.length, file).toBeGreaterThan(5);
    }
  });

  it('replay against the current workflow code without non-determinism errors', async () => {
    const workflowBundle = await intentWorkflowBundle();
    const files = await historyFiles();
    const histories = await Promise.all(
      files.map(async (file) => ({ workflowId: file.replace(/\.json$/, ''), history: await loadHistory(file) })),
    );
    const results: { workflowId: string; error?: unknown }[] = [];
    for await (const result of Worker.runReplayHistories({ workflowBundle, replayName: 'intent-replay' }, histories))
      results.push(result);
    expect(results.map((r) => r.workflowId).sort()).toEqual(histories.map((h) => h.workflowId).sort());
    for (const r of results) expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
  });

  it('fail to replay against an incompatible workflow (the control case: the replay check can fail)', async () => {
    const workflowBundle = await cachedWorkflowBundle({
      workflowsPath: fileURLToPath(new URL('./fixtures/changed-intent-workflow.ts', import.meta.url)),
    });
    const history = await loadHistory('rate-limited-then-succeeded-v0.2.0.json');
    await expect(
      Worker.runReplayHistory({ workflowBundle, replayName: 'intent-replay-control' }, history, 'control'),
    ).rejects.toThrow(/[Nn]ondeterminism|[Nn]on-determinism/);
  });

  it('hold no credential secret (invariant 9)', async () => {
    for (const file of await historyFiles()) {
      const text = await readFile(path.join(historiesDir, file), 'utf8');
      const payloads = [...text.matchAll(/"data": "([A-Za-z0-9+/=]+)"/g)].map((m) =>
        Buffer.from(m[1]!, 'base64').toString('utf8'),
      );
      expect(payloads.length, file).toBeGreaterThan(0);
      expect([text, ...payloads].join('\n'), file).not.toContain(SIM_SECRET);
    }
  });
});
