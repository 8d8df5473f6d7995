import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, resolveSecrets } from '../../src/config.js';

const creds = (v: unknown) => ({ RETRYQ_CREDENTIALS: JSON.stringify(v) });

function problemsOf(env: Record<string, string>) {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig with an empty environment', () => {
  it('uses the embedded dev server on 127.0.0.1:7233 with the UI on 8233', () => {
    const c = loadConfig({});
    expect(c.temporal.external).toBe(false);
    expect(c.temporal.address).toBe('127.0.0.1:7233');
    expect(c.temporal.namespace).toBe('default');
    expect(c.dev.uiPort).toBe(8233);
    expect(c.taskQueuePrefix).toBe('retryq');
    expect(c.credentials).toEqual([]);
    expect(c.intents.defaultDeadlineMs).toBe(24 * 3_600_000);
  });
});

describe('loadConfig with a Temporal address configured', () => {
  it('connects there and starts no embedded server', () => {
    const c = loadConfig({ TEMPORAL_ADDRESS: 'temporal.example.com:7233', TEMPORAL_NAMESPACE: 'payments' });
    expect(c.temporal.external).toBe(true);
    expect(c.temporal.address).toBe('temporal.example.com:7233');
    expect(c.temporal.namespace).toBe('payments');
    expect(c.temporal.connect.connectionOptions.address).toBe('temporal.example.com:7233');
  });

  it('passes the API key to the connection but never into error messages', () => {
    const c = loadConfig({ TEMPORAL_ADDRESS: 'x.tmprl.cloud:7233', TEMPORAL_API_KEY: 'tk_live_SECRET' });
    expect(c.temporal.connect.connectionOptions.apiKey).toBe('tk_live_SECRET');
    const problems = problemsOf({
      TEMPORAL_ADDRESS: 'x:7233',
      TEMPORAL_API_KEY: 'tk_live_SECRET',
      RETRYQ_DEV_PORT: 'x',
    });
    expect(JSON.stringify(problems)).not.toContain('tk_live_SECRET');
  });
});

describe('loadConfig with credentials', () => {
  it('fills defaults for limits', () => {
    const c = loadConfig(creds([{ id: 'acme-prod', secretEnv: 'ACME_PROD_KEY' }]));
    expect(c.credentials).toEqual([
      {
        id: 'acme-prod',
        secretEnv: 'ACME_PROD_KEY',
        requestsPerMinute: 600,
        concurrency: 4,
        inspectRequestsPerMinute: 120,
        inspectConcurrency: 2,
        authHeader: 'authorization',
        authScheme: 'Bearer',
      },
    ]);
  });

  it('lists every problem at once, each with the variable path, the value seen and the rule', () => {
    const problems = problemsOf({
      ...creds([
        { id: 'Bad Id', secretEnv: 'ok_var', requestsPerMinute: -5 },
        { id: 'b', secretEnv: '1nope', concurrency: 'four' },
      ]),
      RETRYQ_DEV_PORT: '70000',
      RETRYQ_DEFAULT_DEADLINE: 'tomorrow',
    });
    const byVar = Object.fromEntries(problems.map((p) => [p.variable, p]));
    expect(Object.keys(byVar).sort()).toEqual(
      [
        'RETRYQ_CREDENTIALS[0].id',
        'RETRYQ_CREDENTIALS[0].requestsPerMinute',
        'RETRYQ_CREDENTIALS[1].secretEnv',
        'RETRYQ_CREDENTIALS[1].concurrency',
        'RETRYQ_DEV_PORT',
        'RETRYQ_DEFAULT_DEADLINE',
      ].sort(),
    );
    expect(byVar['RETRYQ_CREDENTIALS[0].id']?.value).toBe('"Bad Id"');
    expect(byVar['RETRYQ_DEV_PORT']?.rule).toContain('1 to 65535');
    expect(byVar['RETRYQ_DEFAULT_DEADLINE']?.rule).toContain("'30s'");
  });

  it('rejects malformed JSON with an example of the expected shape', () => {
    const [p] = problemsOf({ RETRYQ_CREDENTIALS: '[{id: acme}]' });
    expect(p?.variable).toBe('RETRYQ_CREDENTIALS');
    expect(p?.rule).toContain('JSON array');
  });

  it('rejects unknown fields such as an inline secret, without echoing other fields', () => {
    const problems = problemsOf(creds([{ id: 'a', secretEnv: 'A_KEY', secret: 'sk_live_123' }]));
    expect(problems[0]?.variable).toBe('RETRYQ_CREDENTIALS[0]');
    expect(problems[0]?.rule).toMatch(/secret/);
  });

  it('rejects duplicate credential ids', () => {
    const problems = problemsOf(
      creds([
        { id: 'a', secretEnv: 'A' },
        { id: 'a', secretEnv: 'B' },
      ]),
    );
    expect(problems).toEqual([{ variable: 'RETRYQ_CREDENTIALS[1].id', value: 'a', rule: 'must be unique' }]);
  });
});

describe('resolveSecrets', () => {
  const config = loadConfig(
    creds([
      { id: 'a', secretEnv: 'A_KEY' },
      { id: 'b', secretEnv: 'B_KEY' },
    ]),
  );

  it('reads each secret from its variable', () => {
    expect(resolveSecrets(config.credentials, { A_KEY: 'sa', B_KEY: 'sb' })).toEqual(
      new Map([
        ['a', 'sa'],
        ['b', 'sb'],
      ]),
    );
  });

  it('names every missing variable and never prints a secret that is present', () => {
    try {
      resolveSecrets(config.credentials, { A_KEY: 'sk_live_visible?' });
      throw new Error('expected ConfigError');
    } catch (err) {
      expect((err as ConfigError).problems.map((p) => p.variable)).toEqual(['B_KEY']);
      expect((err as Error).message).not.toContain('sk_live_visible?');
    }
  });
});

describe('loadConfig worker sizing', () => {
  it('bounds the workflow cache and workflow-task slots by default (100 cached, 10 at once)', () => {
    expect(loadConfig({}).worker).toEqual({ maxCachedWorkflows: 100, workflowTaskConcurrency: 10 });
  });

  it('reads RETRYQ_MAX_CACHED_WORKFLOWS and RETRYQ_WORKFLOW_TASK_CONCURRENCY', () => {
    const c = loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '2000', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '40' });
    expect(c.worker).toEqual({ maxCachedWorkflows: 2000, workflowTaskConcurrency: 40 });
    expect(loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '0' }).worker.maxCachedWorkflows).toBe(0);
  });

  it('names the variable, the value and the rule for every bad value', () => {
    expect(problemsOf({ RETRYQ_MAX_CACHED_WORKFLOWS: 'lots', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '1.5' })).toEqual([
      { variable: 'RETRYQ_MAX_CACHED_WORKFLOWS', value: 'lots', rule: 'must be a whole number' },
      { variable: 'RETRYQ_WORKFLOW_TASK_CONCURRENCY', value: '1.5', rule: 'must be a whole number' },
    ]);
    expect(problemsOf({ RETRYQ_MAX_CACHED_WORKFLOWS: '1' })).toEqual([
      {
        variable: 'RETRYQ_MAX_CACHED_WORKFLOWS',
        value: '1',
        rule: 'must be 0 (no cache: every workflow task replays) or at least 2',
      },
    ]);
    expect(problemsOf({ RETRYQ_MAX_CACHED_WORKFLOWS: '20', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '40' })).toEqual([
      {
        variable: 'RETRYQ_WORKFLOW_TASK_CONCURRENCY',
        value: '40',
        rule: 'must not exceed the cache size (20): a running workflow task needs its workflow in the cache',
      },
    ]);
  });
});
