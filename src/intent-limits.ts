/**
 * Size limits of an intent's action, checked by `submit` before anything reaches Temporal.
 *
 * An intent's body travels in Temporal payloads: in the workflow's input, in every dispatch activity's input and in
 * each continue-as-new. Temporal refuses a payload above 2 MiB ("Blob data size exceeds limit") and a gRPC message
 * above 4 MiB, with an error that names neither the field nor the limit. The defaults below stay well inside both;
 * each limit can be raised up to its ceiling ({@link limitCeilings}).
 *
 * @example
 * ```ts
 * import { sizeProblems, defaultIntentLimits } from './intent-limits.js';
 * sizeProblems({ action: { method: 'POST', url: 'https://api.example.com/v1', body: 'x'.repeat(300_000) } }, defaultIntentLimits);
 * // [{ path: 'action.body', message: 'is 300,002 bytes of JSON; at most 262,144 bytes (256 KiB) are allowed …' }]
 * ```
 */

/** Size limits of one intent, in bytes (UTF-8). */
export interface IntentLimits {
  /** The JSON body, as sent. @default 262_144 (256 KiB) */
  maxBodyBytes: number;
  /** All extra headers together, each counted as `Name: value` plus a line break. @default 16_384 (16 KiB) */
  maxHeaderBytes: number;
  /** The action's URL, and the inspection URL template. @default 8_192 (8 KiB) */
  maxUrlBytes: number;
}

/** The limits `submit` applies unless configured otherwise. */
export const defaultIntentLimits: Readonly<IntentLimits> = {
  maxBodyBytes: 256 * 1024,
  maxHeaderBytes: 16 * 1024,
  maxUrlBytes: 8 * 1024,
};

/**
 * The most each limit may be raised to: a body of 1 MiB still leaves the workflow input and each dispatch input
 * well under Temporal's 2 MiB payload limit.
 */
export const limitCeilings: Readonly<IntentLimits> = {
  maxBodyBytes: 1024 * 1024,
  maxHeaderBytes: 64 * 1024,
  maxUrlBytes: 64 * 1024,
};

/** Where each limit is configured, for messages. */
export const limitSettings: Readonly<Record<keyof IntentLimits, { option: string; env: string }>> = {
  maxBodyBytes: { option: 'limits.maxBodyBytes', env: 'RETRYQ_MAX_BODY_BYTES' },
  maxHeaderBytes: { option: 'limits.maxHeaderBytes', env: 'RETRYQ_MAX_HEADER_BYTES' },
  maxUrlBytes: { option: 'limits.maxUrlBytes', env: 'RETRYQ_MAX_URL_BYTES' },
};

/** `262,144 bytes (256 KiB)`. */
export function describeBytes(bytes: number): string {
  const exact = `${bytes.toLocaleString('en-US')} byte${bytes === 1 ? '' : 's'}`;
  if (bytes < 1024) return exact;
  const [unit, size] = bytes < 1024 * 1024 ? ['KiB', bytes / 1024] : ['MiB', bytes / (1024 * 1024)];
  const shown = Number.isInteger(size) ? String(size) : size.toFixed(1);
  return `${exact} (${shown} ${unit})`;
}

/** One size problem: where, how large, and the limit. */
export interface SizeProblem {
  path: string;
  message: string;
  /** Bytes found. */
  size: number;
  /** Bytes allowed. */
  limit: number;
}

function tooLarge(path: string, what: string, size: number, key: keyof IntentLimits, limit: number): SizeProblem {
  const where = limitSettings[key];
  return {
    path,
    size,
    limit,
    message:
      `is ${describeBytes(size)}${what}; at most ${describeBytes(limit)} are allowed ` +
      `(${where.option} or ${where.env}, up to ${describeBytes(limitCeilings[key])})` +
      (key === 'maxBodyBytes'
        ? '. The body travels in Temporal payloads with every attempt: keep large documents elsewhere and send a reference'
        : ''),
  };
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/**
 * The size problems of a raw intent input, before schema validation (so an oversize body is reported without
 * walking it): fields of the wrong type are left to the schema.
 */
export function sizeProblems(input: unknown, limits: IntentLimits): SizeProblem[] {
  const problems: SizeProblem[] = [];
  if (typeof input !== 'object' || input === null) return problems;
  const intent = input as Record<string, unknown>;
  const action = intent['action'];
  if (typeof action === 'object' && action !== null) {
    const a = action as Record<string, unknown>;
    if (typeof a['url'] === 'string' && utf8(a['url']) > limits.maxUrlBytes)
      problems.push(tooLarge('action.url', '', utf8(a['url']), 'maxUrlBytes', limits.maxUrlBytes));
    const headers = a['headers'];
    if (typeof headers === 'object' && headers !== null) {
      let bytes = 0;
      for (const [name, value] of Object.entries(headers))
        if (typeof value === 'string') bytes += utf8(name) + 2 + utf8(value) + 2;
      if (bytes > limits.maxHeaderBytes)
        problems.push(
          tooLarge(
            'action.headers',
            ' of headers (Name: value and a line break each)',
            bytes,
            'maxHeaderBytes',
            limits.maxHeaderBytes,
          ),
        );
    }
    if (a['body'] !== undefined) {
      let json: string | undefined;
      try {
        json = JSON.stringify(a['body']);
      } catch {
        json = undefined; // not JSON: the schema says so
      }
      if (json !== undefined && utf8(json) > limits.maxBodyBytes)
        problems.push(tooLarge('action.body', ' of JSON', utf8(json), 'maxBodyBytes', limits.maxBodyBytes));
    }
  }
  const inspection = intent['inspection'];
  if (typeof inspection === 'object' && inspection !== null) {
    const url = (inspection as Record<string, unknown>)['url'];
    if (typeof url === 'string' && utf8(url) > limits.maxUrlBytes)
      problems.push(tooLarge('inspection.url', '', utf8(url), 'maxUrlBytes', limits.maxUrlBytes));
  }
  return problems;
}

/** The problems of a set of limits (client options or configuration): whole numbers between 1 and the ceiling. */
export function limitProblems(limits: Partial<IntentLimits>): { key: keyof IntentLimits; message: string }[] {
  const out: { key: keyof IntentLimits; message: string }[] = [];
  for (const key of Object.keys(limitCeilings) as (keyof IntentLimits)[]) {
    const value = limits[key];
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 1 || value > limitCeilings[key])
      out.push({
        key,
        message: `must be a whole number of bytes from 1 to ${describeBytes(limitCeilings[key])}`,
      });
  }
  return out;
}
