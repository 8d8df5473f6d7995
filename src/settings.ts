/**
 * Settings as data: one row per environment variable, with its zod schema, default, unit and doc. The feature that
 * reads a variable declares its row; `src/config.ts` gathers the rows into one table, reads the environment through
 * it ({@link readSettings}) and the configuration page's table is generated from it ({@link renderSettingsTable},
 * `npm run docs:config`), so the code and the docs cannot disagree about a name or a default.
 *
 * A schema reads the variable's trimmed text (never empty: an empty variable counts as unset) and says what is wrong
 * in retryq's words; the default is written as a person would write the variable and parsed by the same schema.
 *
 * @example
 * ```ts
 * import { readSettings, setting, text } from './settings.js';
 * const prefix = setting({
 *   name: 'RETRYQ_TASK_QUEUE_PREFIX',
 *   owner: 'task queues',
 *   schema: text,
 *   default: 'retryq',
 *   doc: 'prefix of all task queue names',
 * });
 * readSettings([prefix], {}).values.get(prefix); // 'retryq'
 * ```
 */
import { z } from 'zod';
import { DURATION_HINT, parseDurationMs } from './duration.js';
import { problemsFromZod } from './errors.js';
import type { Problem } from './errors.js';
import { retryqWords } from './validation-words.js';

/** A schema that reads a variable's text. */
export type TextSchema<T> = z.ZodType<T, string>;

/** One environment variable. */
export interface Setting<T = unknown> {
  /** The variable's name, e.g. `RETRYQ_DEV_PORT` (a family such as `TEMPORAL_TLS_*` for a row read elsewhere). */
  readonly name: string;
  /** The feature that reads it, e.g. `Worker`, `` `retryq dev` ``: the heading the docs group its rows under. */
  readonly owner: string;
  /** Reads the variable's text; `undefined` for a row that `readBy` names another reader for. */
  readonly schema: TextSchema<T> | undefined;
  /** The default as the variable would be written (parsed by `schema`); `undefined`: unset means what `unset` says. */
  readonly default: string | undefined;
  /** What an unset variable means, when that is not simply the default (shown in the docs instead of it). */
  readonly unset?: string;
  /** The unit of the value, when it is a number: `ms`, `MB`, `bytes`, `per second`, … */
  readonly unit?: string;
  /** What it does, one sentence fragment in Markdown. */
  readonly doc: string;
  /** Who reads it when not `loadConfig`, e.g. `@temporalio/envconfig` or `the binary resolver`. */
  readonly readBy?: string;
}

/** Declares a row; the type of its value follows from its schema. */
export function setting<T>(row: Setting<T>): Setting<T> {
  return row;
}

/** What {@link readSettings} found. */
export interface SettingsRead {
  /** Each row's value: what the variable says, else its default (also where the variable has a problem). */
  readonly values: { get: <T>(row: Setting<T>) => T };
  /** The rows whose variable was set (not empty). */
  readonly given: ReadonlySet<Setting>;
  /** One problem per thing wrong, naming the variable (and the path inside a JSON variable) and the value seen. */
  readonly problems: Problem[];
}

const words = retryqWords({ sayFound: false });

/** The default value of a row (its default text through its schema); throws if a row's default is invalid. */
export function defaultOf<T>(row: Setting<T>): T | undefined {
  if (row.default === undefined || row.schema === undefined) return undefined;
  const parsed = row.schema.safeParse(row.default, { error: words });
  if (!parsed.success) throw new Error(`the default of ${row.name} (${row.default}) does not pass its own schema`);
  return parsed.data;
}

/** Reads every row that has a schema from `env`. */
export function readSettings(
  rows: readonly Setting[],
  env: Readonly<Record<string, string | undefined>>,
): SettingsRead {
  const values = new Map<Setting, unknown>();
  const given = new Set<Setting>();
  const problems: Problem[] = [];
  for (const row of rows) {
    if (row.schema === undefined) continue;
    const text = env[row.name]?.trim();
    values.set(row, defaultOf(row));
    if (text === undefined || text === '') continue;
    given.add(row);
    const parsed = row.schema.safeParse(text, { error: words });
    if (parsed.success) values.set(row, parsed.data);
    else problems.push(...problemsOf(row.name, text, parsed.error));
  }
  return { values: { get: <T>(row: Setting<T>) => values.get(row) as T }, given, problems };
}

function problemsOf(name: string, text: string, error: z.ZodError): Problem[] {
  // Issues about the whole variable show its text; issues inside a JSON variable show the value at their path.
  const whole = error.issues.filter((i) => i.path.length === 0);
  const inside = error.issues.filter((i) => i.path.length > 0);
  const problems: Problem[] = whole.map((i) => ({ path: name, message: i.message, received: text }));
  if (inside.length > 0) {
    let input: unknown = text;
    try {
      input = JSON.parse(text);
    } catch {
      // not JSON: paths inside it show no value
    }
    problems.push(...problemsFromZod(new z.ZodError(inside), { input, received: true, prefix: name }));
  }
  return problems;
}

// ---- schemas for variables' text -------------------------------------------------------------------------------

/** Any text (already trimmed, never empty). */
export const text: TextSchema<string> = z.string();

/** Text a pattern accepts. */
export function textMatching(pattern: RegExp, message: string): TextSchema<string> {
  return z.string().regex(pattern, message);
}

/** A TCP port, 1–65535. */
export const port: TextSchema<number> = z
  .string()
  .regex(/^\d+$/, 'must be a TCP port, an integer from 1 to 65535')
  .transform(Number)
  .pipe(
    z
      .number()
      .min(1, 'must be a TCP port, an integer from 1 to 65535')
      .max(65535, 'must be a TCP port, an integer from 1 to 65535'),
  );

/** A duration (`'30s'`, `'24h'`, or milliseconds) greater than zero, in ms. */
export const duration: TextSchema<number> = z.string().transform((value, ctx) => {
  const ms = parseDurationMs(value);
  if (ms === undefined || ms <= 0) {
    ctx.addIssue({ code: 'custom', message: `must be ${DURATION_HINT}, greater than zero`, input: value });
    return z.NEVER;
  }
  return ms;
});

/** A whole number (negative too; the range is the next schema's rule). */
export function wholeNumber(then: z.ZodType<number, number> = z.number()): TextSchema<number> {
  return z
    .string()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(then);
}

/** A size: `1048576`, `512KiB`, `1MiB` (`KB`, `MB` as the binary units), in bytes, between `min` and `max`. */
export function byteSize(min: number, max: number, message: string): TextSchema<number> {
  return z.string().transform((value, ctx) => {
    const m = /^(\d+(?:\.\d+)?)\s*(b|kib|kb|k|mib|mb|m)?$/i.exec(value);
    const unit = (m?.[2] ?? 'b').toLowerCase();
    const bytes = m
      ? Math.round(Number(m[1]) * (unit.startsWith('k') ? 1024 : unit.startsWith('m') ? 1024 * 1024 : 1))
      : NaN;
    if (!Number.isFinite(bytes) || bytes < min || bytes > max) {
      ctx.addIssue({ code: 'custom', message, input: value });
      return z.NEVER;
    }
    return bytes;
  });
}

/** A JSON array read through `items`; `example` is the shape shown when the text is not JSON. */
export function jsonArray<T>(items: z.ZodType<T[]>, example: string): TextSchema<T[]> {
  return z
    .string()
    .transform((value, ctx) => {
      try {
        return JSON.parse(value) as unknown;
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a JSON array like ${example} (${(err as Error).message})`,
          input: value,
        });
        return z.NEVER;
      }
    })
    .pipe(items);
}

// ---- the docs ---------------------------------------------------------------------------------------------------

/** The default as the docs show it. */
export function defaultText(row: Setting): string {
  if (row.unset !== undefined) return row.unset;
  return row.default === undefined ? 'unset' : `\`${row.default}\``;
}

/**
 * The Markdown tables of the configuration page: one per owner, in the rows' order, one row per variable; the unit
 * column only where a row of the group has a unit, and who reads the group's variables when it is not `loadConfig`.
 */
export function renderSettingsTable(rows: readonly Setting[]): string {
  const owners = [...new Set(rows.map((r) => r.owner))];
  const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  return owners
    .map((owner) => {
      const group = rows.filter((r) => r.owner === owner);
      const units = group.some((r) => r.unit !== undefined);
      const readers = [...new Set(group.map((r) => r.readBy))];
      const sharedReader = readers.length === 1 ? readers[0] : undefined;
      const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
      return [
        `### ${owner}`,
        '',
        ...(sharedReader ? [`Read by ${sharedReader}.`, ''] : []),
        line(['variable', 'default', ...(units ? ['unit'] : []), 'meaning']),
        line(['---', '---', ...(units ? ['---'] : []), '---']),
        ...group.map((r) =>
          line([
            `\`${r.name}\``,
            cell(defaultText(r)),
            ...(units ? [r.unit ?? ''] : []),
            cell(r.doc) + (r.readBy && !sharedReader ? ` (read by ${r.readBy})` : ''),
          ]),
        ),
      ].join('\n');
    })
    .join('\n\n');
}
