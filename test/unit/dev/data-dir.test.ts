import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { prepareDataDir } from '../../../src/dev/data-dir.js';
import { DataDirError } from '../../../src/errors.js';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'retryq-data-dir-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function failure(dir: string, files: string[] = []): Promise<DataDirError> {
  const err = await prepareDataDir(dir, files).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DataDirError);
  return err as DataDirError;
}

describe('the data dir of retryq dev', () => {
  it('is created with its parents when missing, and nothing is left behind by the write check', async () => {
    const dir = path.join(root, 'a', 'b', '.data');
    await prepareDataDir(dir, ['temporal.db']);
    expect((await stat(dir)).isDirectory()).toBe(true);
    expect(await readdir(dir)).toEqual([]);
  });

  it('with a file in its place is refused naming RETRYQ_DATA_DIR, the path and the OS error', async () => {
    const file = path.join(root, 'data');
    await writeFile(file, 'not a folder');
    const err = await failure(file);
    expect(err.code).toBe('data_dir_unusable');
    expect(err.osCode).toMatch(/^(EEXIST|ENOTDIR)$/);
    expect(err.message).toContain('RETRYQ_DATA_DIR');
    expect(err.message).toContain(file);
    expect(err.message).toContain(err.osCode!);
    expect(err.message).toMatch(/A file stands where the folder should be/);
  });

  it('below a file is refused with ENOTDIR', async () => {
    await writeFile(path.join(root, 'file'), 'x');
    const err = await failure(path.join(root, 'file', 'data'));
    expect(err.osCode).toBe('ENOTDIR');
    expect(err.message).toContain(path.join(root, 'file', 'data'));
  });
});
