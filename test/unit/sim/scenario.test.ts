import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isScenarioError,
  loadScenarioFile,
  ProviderErrorCode,
  parseScenario,
  ScenarioError,
  scenarioSchema,
} from '../../../src/sim/index.js';

function issuesOf(input: unknown): Array<{ path: string; message: string; received?: unknown }> {
  try {
    parseScenario(input);
  } catch (error) {
    if (isScenarioError(error)) return [...error.problems];
    throw error;
  }
  throw new Error('expected the scenario to be rejected');
}

describe('scenario defaults', () => {
  it('fill every field, with one key sk_test_acme (id acme-prod) and 600 writes per minute', () => {
    const scenario = parseScenario({});
    expect(scenario).toMatchObject({
      keys: [{ key: 'sk_test_acme', id: 'acme-prod', permission: 'allowed', workspace: 'default' }],
      rateLimitPerMinute: 600,
      inspectPerMinute: 300,
      retryAfterFormat: 'seconds',
      clockOffsetMs: 0,
      honorIdempotencyKeys: true,
      rules: [],
      admin: true,
      maxOperations: 100_000,
    });
  });

  it('fill rule defaults: match everything (writes), repeat the last step, one sequence per idempotency key', () => {
    const [rule] = parseScenario({ rules: [{ steps: ['normal'] }] }).rules;
    expect(rule).toEqual({ match: {}, steps: ['normal'], then: 'repeat', per: 'idempotencyKey' });
  });

  it('parse their own output again (so updates can merge into a validated scenario)', () => {
    const once = parseScenario({
      rules: [{ steps: [{ status: 429, retryAfter: { httpDate: 'rfc850', inSeconds: 3 } }] }],
    });
    expect(scenarioSchema.parse(once)).toEqual(once);
  });
});

describe('scenario validation errors', () => {
  it.each([
    [{ rateLimitPerMinute: 0 }, 'rateLimitPerMinute', 0, '>=1'],
    [{ rateLimitPerMinute: 'fast' }, 'rateLimitPerMinute', 'fast', 'expected number'],
    [{ retryAfterFormat: 'minutes' }, 'retryAfterFormat', 'minutes', '"seconds"|"http-date"'],
    [
      { rules: [{ steps: [{ commitThen: 503 }] }] },
      'rules[0].steps[0].commitThen',
      503,
      "'timeout', 'reset', 500, 502, 504",
    ],
    [{ rules: [{ steps: [{ status: 42 }] }] }, 'rules[0].steps[0].status', 42, 'from 400 to 599'],
    [
      { rules: [{ steps: [{ sttaus: 503 }] }] },
      'rules[0].steps[0]',
      { sttaus: 503 },
      'status, commitThen, reset, delayMs',
    ],
    [{ rules: [{ steps: ['nrmal'] }] }, 'rules[0].steps[0]', 'nrmal', "'normal' or an object"],
    [{ rules: [{ steps: [{ status: 503, extra: 1 }] }] }, 'rules[0].steps[0].extra', 1, 'allowed fields: status, code'],
    [
      { rules: [{ steps: [{ status: 503, retryAfter: 'http-date:120' }] }] },
      'rules[0].steps[0].retryAfter',
      'http-date:120',
      "'http-date:+120s'",
    ],
    [
      { rules: [{ steps: [{ status: 503, retryAfter: { httpDate: 'iso', inSeconds: 1 } }] }] },
      'rules[0].steps[0].retryAfter.httpDate',
      'iso',
      '"imf"|"rfc850"|"asctime"',
    ],
    [
      { rules: [{ steps: [{ status: 503, retryAfter: true }] }] },
      'rules[0].steps[0].retryAfter',
      true,
      'a number of seconds',
    ],
    [
      { rules: [{ steps: [{ status: 503, retryAfter: 'a\nb' }] }] },
      'rules[0].steps[0].retryAfter',
      'a\nb',
      'no line breaks',
    ],
    [
      { rules: [{ match: { method: 'get' }, steps: ['normal'] }] },
      'rules[0].match.method',
      'get',
      'POST, PUT, PATCH, DELETE, GET',
    ],
    [{ rules: [{ steps: [] }] }, 'rules[0].steps', [], 'at least one step'],
    [{ keys: [{ key: 'a' }, { key: 'a' }] }, 'keys[1].key', 'a', 'duplicate API key'],
    [
      {
        keys: [
          { key: 'a', id: 'x' },
          { key: 'b', id: 'x' },
        ],
      },
      'keys[1].id',
      'x',
      'ids must be unique',
    ],
    [{ keys: [{ key: 'a', permission: 'read' }] }, 'keys[0].permission', 'read', '"allowed"|"denied"'],
    [{ kyes: [] }, 'kyes', [], 'allowed fields: keys, rateLimitPerMinute'],
    [{ webhookUrl: 'ftp://x' }, 'webhookUrl', 'ftp://x', 'http:// or https://'],
    [{ bursts: [{ afterMs: 0, durationMs: 0 }] }, 'bursts[0].durationMs', 0, '>=1'],
    ['hello', '', 'hello', 'expected object'],
  ])('name the field, the value and what is allowed for %j', (input, path, value, allowed) => {
    const issues = issuesOf(input);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toEqual({ path, received: value, message: expect.stringContaining(allowed) as unknown });
  });

  it('list every problem at once in the error message', () => {
    const error = (() => {
      try {
        parseScenario({ rateLimitPerMinute: 0, retryAfterFormat: 'x' });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ScenarioError);
    expect((error as Error).message).toMatch(/rateLimitPerMinute: .* \(got 0\)/);
    expect((error as Error).message).toMatch(/retryAfterFormat: .* \(got "x"\)/);
  });
});

describe('loadScenarioFile', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'provider-sim-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads YAML scenarios', async () => {
    const file = join(dir, 'a.yaml');
    await writeFile(file, 'rateLimitPerMinute: 7\nrules:\n  - steps: [{ commitThen: timeout }]\n');
    const scenario = await loadScenarioFile(file);
    expect(scenario.rateLimitPerMinute).toBe(7);
    expect(scenario.rules[0]?.steps).toEqual([{ commitThen: 'timeout' }]);
  });

  it('reads JSON scenarios', async () => {
    const file = join(dir, 'a.json');
    await writeFile(file, JSON.stringify({ honorIdempotencyKeys: false }));
    expect((await loadScenarioFile(file)).honorIdempotencyKeys).toBe(false);
  });

  it('names the file and the field when the file holds an invalid scenario', async () => {
    const file = join(dir, 'bad.yml');
    await writeFile(file, 'rules:\n  - steps: [{ status: 700 }]\n');
    await expect(loadScenarioFile(file)).rejects.toThrow(`Invalid ${file} (1 problem):\n  - rules[0].steps[0].status`);
  });

  it('reports a syntax error as a ScenarioError naming the file', async () => {
    const file = join(dir, 'broken.json');
    await writeFile(file, '{ "keys": [ }');
    await expect(loadScenarioFile(file)).rejects.toThrow(/broken\.json \(1 problem\):\n {2}- \(root\): not valid JSON/);
  });

  it('accepts the example scenario shipped with the simulator', async () => {
    const scenario = await loadScenarioFile(
      new URL('../../../src/sim/scenarios/example.yaml', import.meta.url).pathname,
    );
    expect(scenario.keys.map((k) => k.id)).toEqual(['acme-prod', 'globex-prod', 'revoked']);
    expect(scenario.rules.length).toBeGreaterThan(3);
  });
});

describe('docs/provider-sim.md', () => {
  it('documents every scenario field and every error code the simulator produces', async () => {
    const doc = await readFile(new URL('../../../docs/provider-sim.md', import.meta.url), 'utf8');
    // Each field is an item of the scenario fields' list: "- `field` (default): meaning".
    for (const field of Object.keys(scenarioSchema.shape)) expect(doc).toContain(`\n- \`${field}\` (`);
    for (const code of Object.values(ProviderErrorCode)) expect(doc).toContain(code);
  });
});
