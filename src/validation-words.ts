/**
 * Validation messages in retryq's words: what is wrong and what is allowed, never the validation library's
 * wording ("Invalid input: expected string, received undefined"). Passed as the per-parse error map of every zod
 * boundary (`schema.safeParse(input, { error: inRetryqWords })`); messages a schema sets itself win.
 *
 * Not for workflow code (it is only used where zod runs).
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { inRetryqWords } from './validation-words.js';
 * z.object({ key: z.string() }).safeParse({}, { error: inRetryqWords }).error?.issues[0]?.message;
 * // 'is required: text (a string)'
 * ```
 */
import type { z } from 'zod';

const TYPE_WORDS: Record<string, string> = {
  string: 'text (a string)',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'an object',
  array: 'a list (JSON array)',
  date: 'a date',
  bigint: 'a whole number',
  null: 'null',
  undefined: 'nothing',
  record: 'an object',
  map: 'an object',
  set: 'a list',
};

/** What a value is, for "(got …)": `a number (12)`, `text "abc"`, `NaN (not a number)`. */
export function describeFound(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN, not a number' : `the number ${value}`;
  if (typeof value === 'string')
    return value.length > 40 ? `text of ${value.length} characters` : `the text ${JSON.stringify(value)}`;
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (value instanceof Date) return 'a date';
  if (typeof value === 'object') return 'an object';
  return typeof value;
}

function sizeWords(origin: string, bound: number | bigint, inclusive: boolean | undefined, least: boolean): string {
  const n = Number(bound);
  const atLeast = least
    ? inclusive === false
      ? 'more than'
      : 'at least'
    : inclusive === false
      ? 'less than'
      : 'at most';
  switch (origin) {
    case 'string':
      return least && n === 1 && inclusive !== false ? 'must not be empty' : `must be ${atLeast} ${n} characters long`;
    case 'array':
    case 'set':
      return least && n === 1 && inclusive !== false
        ? 'must list at least one entry'
        : `must have ${atLeast} ${n} entries`;
    case 'date':
      return `must be ${least ? 'on or after' : 'on or before'} ${new Date(n).toISOString()}`;
    default:
      return `must be ${atLeast} ${n}`;
  }
}

/**
 * The messages of validation issues, in retryq's words; `sayFound: false` leaves out "(got …)" for boundaries that
 * report the value found in the problem's `received` already. The map returns `undefined` for an issue a schema
 * words itself.
 */
export function retryqWords(options: { sayFound: boolean }): (issue: z.core.$ZodRawIssue) => string | undefined {
  return (issue) => {
    const message = wordsFor(issue);
    return message === undefined || options.sayFound ? message : message.replace(/ \(got [^)]*\)$/, '');
  };
}

/** The message of one validation issue in retryq's words, with what was found. */
export const inRetryqWords = retryqWords({ sayFound: true });

function wordsFor(issue: z.core.$ZodRawIssue): string | undefined {
  const input = issue.input;
  switch (issue.code) {
    case 'invalid_type': {
      const expected = TYPE_WORDS[issue.expected] ?? issue.expected;
      if (input === undefined) return `is required: ${expected}`;
      if (issue.expected === 'number' && typeof input === 'number' && !Number.isFinite(input))
        return `must be a finite number (got ${describeFound(input)})`;
      return `must be ${expected} (got ${describeFound(input)})`;
    }
    case 'too_small':
      return sizeWords(issue.origin, issue.minimum, issue.inclusive, true);
    case 'too_big':
      return sizeWords(issue.origin, issue.maximum, issue.inclusive, false);
    case 'invalid_value': {
      const allowed = issue.values.map((v) => JSON.stringify(v));
      if (input === undefined) return `is required: one of ${allowed.join(', ')}`;
      return allowed.length === 1
        ? `must be ${allowed[0]} (got ${describeFound(input)})`
        : `must be one of ${allowed.join(', ')} (got ${describeFound(input)})`;
    }
    case 'unrecognized_keys':
      return (
        `has ${issue.keys.length === 1 ? 'a field' : 'fields'} retryq does not know: ` +
        `${issue.keys.map((k) => JSON.stringify(k)).join(', ')} (check the spelling; docs/client-api.md lists the fields)`
      );
    case 'invalid_union':
      return `does not match any allowed form (got ${describeFound(input)})`;
    case 'invalid_format':
      return issue.format === 'regex'
        ? `has the wrong format (must match ${issue.pattern ?? 'the pattern'})`
        : `must be a valid ${issue.format === 'datetime' ? 'ISO 8601 time with a UTC offset' : issue.format}`;
    case 'not_multiple_of':
      return `must be a multiple of ${Number(issue.divisor)}`;
    case 'invalid_key':
      return 'has a key that is not allowed';
    case 'invalid_element':
      return 'has an entry that is not allowed';
    default:
      return undefined;
  }
}
