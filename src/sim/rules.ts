/**
 * Scripted answers: the first rule whose match holds hands out its next step. Each rule walks its
 * steps once per idempotency key (or once for everyone with `per: 'rule'`); after the last step it
 * repeats that step or falls back to normal behaviour (`then: 'normal'`).
 */
import { writeMethods } from './scenario.js';
import type { Rule, Step } from './scenario.js';

/** What a rule is matched against. */
export interface RuleRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  apiKey: string;
  apiKeyId: string;
}

interface CompiledRule {
  index: number;
  rule: Rule;
  keyPattern: RegExp | undefined;
  methods: ReadonlySet<string>;
}

/** `*` matches any run of characters, `?` exactly one; everything else literally. */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (const ch of glob) {
    if (ch === '*') source += '[\\s\\S]*';
    else if (ch === '?') source += '[\\s\\S]';
    else source += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 'u');
}

function compile(rule: Rule, index: number): CompiledRule {
  const method = rule.match.method;
  const methods = method === undefined ? writeMethods : Array.isArray(method) ? method : [method];
  return {
    index,
    rule,
    keyPattern: rule.match.idempotencyKey === undefined ? undefined : globToRegExp(rule.match.idempotencyKey),
    methods: new Set<string>(methods),
  };
}

function matches(compiled: CompiledRule, request: RuleRequest): boolean {
  const { match } = compiled.rule;
  if (!compiled.methods.has(request.method)) return false;
  if (match.pathPrefix !== undefined && !request.path.startsWith(match.pathPrefix)) return false;
  if (match.apiKey !== undefined && match.apiKey !== request.apiKey && match.apiKey !== request.apiKeyId) return false;
  if (compiled.keyPattern || match.idempotencyKeyPrefix !== undefined) {
    const key = request.idempotencyKey;
    if (key === undefined) return false;
    if (compiled.keyPattern && !compiled.keyPattern.test(key)) return false;
    if (match.idempotencyKeyPrefix !== undefined && !key.startsWith(match.idempotencyKeyPrefix)) return false;
  }
  return true;
}

/** The scenario's rules with their positions in each step sequence. */
export class RuleBook {
  readonly #rules: readonly CompiledRule[];
  /** Steps consumed per `rule index + scope`; insertion-ordered so the oldest can be dropped. */
  readonly #cursors = new Map<string, number>();

  constructor(
    rules: readonly Rule[],
    readonly maxCursors = 100_000,
  ) {
    this.#rules = rules.map(compile);
  }

  /** The step for this request (consuming it), or `'normal'` when no rule matches. */
  next(request: RuleRequest): Step {
    const hit = this.#rules.find((r) => matches(r, request));
    if (!hit) return 'normal';
    const { rule } = hit;
    const scope = rule.per === 'rule' ? '' : (request.idempotencyKey ?? '');
    const cursorKey = `${hit.index}\u0000${scope}`;
    const position = this.#cursors.get(cursorKey) ?? 0;
    this.#cursors.delete(cursorKey);
    this.#cursors.set(cursorKey, position + 1);
    if (this.#cursors.size > this.maxCursors) {
      const oldest = this.#cursors.keys().next();
      if (!oldest.done) this.#cursors.delete(oldest.value);
    }
    const step = rule.steps[position];
    if (step !== undefined) return step;
    return rule.then === 'normal' ? 'normal' : (rule.steps[rule.steps.length - 1] ?? 'normal');
  }
}
