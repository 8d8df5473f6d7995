/**
 * Checks `retryq dev`'s data dir (RETRYQ_DATA_DIR) before anything is started in it: the folder exists or can be
 * made, it is a folder, and retryq can write files in it (the Temporal server's SQLite file, the log). Every
 * problem becomes one {@link DataDirError} naming the variable, the path and the OS error, instead of an
 * `Unhandled 'error' event` from deep inside a stream.
 *
 * @example
 * ```ts
 * import { prepareDataDir } from './data-dir.js';
 * await prepareDataDir('/home/me/project/.data'); // throws DataDirError when unusable
 * ```
 */
import { constants } from 'node:fs';
import { access, mkdir, open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { DataDirError } from '../errors.js';

/** The OS error's code, when it has one (`EROFS`, `EACCES`, …). */
export function osErrorCode(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** What to do about an OS error on the data dir, in one sentence. */
function hintFor(code: string | undefined, dir: string): string {
  switch (code) {
    case 'EROFS':
      return 'That file system is read-only: set RETRYQ_DATA_DIR to a folder on a writable disk.';
    case 'EACCES':
    case 'EPERM':
      return `Give this user write access to ${dir} (or its parent), or set RETRYQ_DATA_DIR to a folder it can write.`;
    case 'EEXIST':
    case 'ENOTDIR':
      return 'A file stands where the folder should be: move that file away, or set RETRYQ_DATA_DIR to another path.';
    case 'ENOSPC':
    case 'EDQUOT':
      return 'The disk is full: free some space there, or set RETRYQ_DATA_DIR to a folder on another disk.';
    default:
      return 'Fix that, or set RETRYQ_DATA_DIR to another folder.';
  }
}

/** A {@link DataDirError} for an OS error met while doing something to the data dir. */
export function dataDirError(dir: string, doing: string, err: unknown): DataDirError {
  const code = osErrorCode(err);
  const message = err instanceof Error ? err.message : String(err);
  return new DataDirError(dir, doing, code, message, hintFor(code, dir));
}

/**
 * Makes sure `dir` is a folder retryq can write, creating it (and its parents) when missing. `files` are names
 * inside it that must be writable when they exist (the SQLite file, the log).
 */
export async function prepareDataDir(dir: string, files: readonly string[] = []): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (err) {
    // Node's recursive mkdir turns some errors into ENOENT (EROFS, for one): ask once more without recursion.
    const plain =
      osErrorCode(err) === 'ENOENT'
        ? await mkdir(dir).then(
            () => undefined,
            (e: unknown) => e,
          )
        : err;
    if (plain !== undefined) throw dataDirError(dir, 'create the folder', plain);
  }
  let info;
  try {
    info = await stat(dir);
  } catch (err) {
    throw dataDirError(dir, 'read the folder', err);
  }
  if (!info.isDirectory()) {
    const err = Object.assign(new Error(`ENOTDIR: not a directory, '${dir}' is a file`), { code: 'ENOTDIR' });
    throw dataDirError(dir, 'use', err);
  }
  // A real write, flushed: access(W_OK) says yes on a read-only mount's folder for root, and a full disk only
  // shows when data has to go somewhere.
  const probe = path.join(dir, `.retryq-write-check-${process.pid}`);
  try {
    const handle = await open(probe, 'w');
    try {
      await handle.writeFile('retryq checks that it can write here\n'.repeat(64));
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    await rm(probe, { force: true }).catch(() => undefined);
    throw dataDirError(dir, 'write files in', err);
  }
  await rm(probe, { force: true }).catch(() => undefined);
  for (const name of files) {
    const file = path.join(dir, name);
    try {
      await access(file, constants.W_OK);
    } catch (err) {
      if (osErrorCode(err) === 'ENOENT') continue;
      throw dataDirError(dir, `write ${name} in`, err);
    }
  }
}
