/**
 * The errors of `retryq dev`'s data dir and server supervision. (Moves into src/errors.ts with #15's RetryqError.)
 */

abstract class DevError extends Error {
  abstract readonly code: string;
  override get name(): string {
    return this.constructor.name;
  }
}

/**
 * `retryq dev` cannot use its data dir (RETRYQ_DATA_DIR): it is read-only, a file stands in its place, permission
 * is denied, the disk is full… The message names the variable, the path and the OS error; the CLI exits with 78.
 */
export class DataDirError extends DevError {
  readonly code = 'data_dir_unusable';
  constructor(
    /** The data dir (absolute). */
    readonly path: string,
    /** What retryq was doing: `create the folder`, `write a file in it`, … */
    readonly doing: string,
    /** The OS error's code (`EROFS`, `EACCES`, `ENOTDIR`, `ENOSPC`, …), when the OS gave one. */
    readonly osCode: string | undefined,
    /** The OS error as the OS worded it. */
    readonly osMessage: string,
    /** What to do about it. */
    hint: string,
  ) {
    super(`RETRYQ_DATA_DIR: retryq dev cannot ${doing} ${path}: ${osMessage}. ${hint}`);
  }
}

/** Who holds a data dir: another `retryq dev`. */
export interface DataDirHolder {
  pid: number;
  /** The Temporal gRPC address it serves. */
  address: string;
  /** Its Web UI port, when it serves the UI. */
  uiPort?: number | undefined;
  /** When it started (ISO). */
  startedAt: string;
}

/** Another `retryq dev` is running on the same data dir; nothing was started. The CLI exits with 78. */
export class DataDirInUseError extends DevError {
  readonly code = 'data_dir_in_use';
  constructor(
    readonly path: string,
    /** The other `retryq dev`, when it answered; `undefined` when it holds the lock but did not say who it is. */
    readonly holder: DataDirHolder | undefined,
  ) {
    const who = holder
      ? `another retryq dev (pid ${holder.pid}, Temporal ${holder.address}` +
        `${holder.uiPort !== undefined ? `, Web UI port ${holder.uiPort}` : ''}, running since ${holder.startedAt})`
      : 'another retryq dev';
    super(
      `RETRYQ_DATA_DIR: ${path} is in use by ${who}, so this one started nothing: two Temporal servers on one ` +
        `SQLite file would corrupt each other's work. Use that one, stop it first` +
        `${holder ? ` (Ctrl-C in its terminal, or kill ${holder.pid})` : ''}, or give this one its own RETRYQ_DATA_DIR.`,
    );
  }
}

/** The embedded Temporal server kept dying; `retryq dev` stopped. */
export class ServerRestartsExhaustedError extends DevError {
  readonly code = 'server_restarts_exhausted';
}
