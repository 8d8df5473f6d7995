/**
 * `retryq dev`'s log file: JSON lines appended to `<data dir>/retryq-dev.log` from the SDK (TypeScript and native
 * core) and from the Temporal server's output. A write that fails (a full disk, the file removed from a read-only
 * remount) is said once on stderr in retryq's words, never as an unhandled stream error.
 *
 * @example
 * ```ts
 * import { openJsonLog } from './log-file.js';
 * const log = openJsonLog('.data/retryq-dev.log', (line) => process.stderr.write(line + '\n'));
 * log.write({ source: 'temporal-server', line: 'started' });
 * ```
 */
import { createWriteStream } from 'node:fs';

/** An append-only log of JSON lines. */
export interface JsonLog {
  /** The file's path. */
  readonly path: string;
  /** Appends one record, with the time (`at`) first. */
  write(record: Record<string, unknown>): void;
  /** Flushes and closes the file. */
  close(): Promise<void>;
}

/** Opens (creates) the log for appending. `warn` hears, once, that writing failed. */
export function openJsonLog(file: string, warn: (line: string) => void): JsonLog {
  const stream = createWriteStream(file, { flags: 'a' });
  let failed = false;
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (failed) return;
    failed = true;
    const full = err.code === 'ENOSPC' || err.code === 'EDQUOT';
    warn(
      `retryq: cannot write the log file ${file} (${err.message})` +
        (full ? ': the disk is full. Free some space there; ' : '; ') +
        'retryq keeps running without it.',
    );
  });
  return {
    path: file,
    write(record) {
      if (failed || stream.destroyed) return;
      stream.write(JSON.stringify({ at: new Date().toISOString(), ...record }) + '\n');
    },
    close: () =>
      new Promise((resolve) => {
        if (failed || stream.destroyed) return resolve();
        stream.end(() => resolve());
      }),
  };
}
