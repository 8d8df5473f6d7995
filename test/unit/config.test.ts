import { describe, expect, it } from 'vitest';
import { loadConfig, resolveSecrets } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

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
        inspectReserve: 0.2,
        inspectConcurrency: 2,
        authHeader: 'authorization',
        authScheme: 'Bearer',
        learn: 'down',
      },
    ]);
  });

  it('reads how a credential learns from rate-limit headers, and names a bad learn or bucketHeader', () => {
    const c = loadConfig(creds([{ id: 'a', secretEnv: 'A_KEY', learn: 'up', bucketHeader: 'x-shopify-bucket' }]));
    expect(c.credentials[0]).toMatchObject({ learn: 'up', bucketHeader: 'x-shopify-bucket' });
    const problems = problemsOf(
      creds([{ id: 'a', secretEnv: 'A_KEY', learn: 'sideways', bucketHeader: 'not a header' }]),
    );
    const byVar = Object.fromEntries(problems.map((p) => [p.path, p]));
    expect(byVar['RETRYQ_CREDENTIALS[0].learn']?.message).toContain("must be 'down'");
    expect(byVar['RETRYQ_CREDENTIALS[0].bucketHeader']?.message).toContain('must be an HTTP header name');
    expect(Object.keys(byVar)).toHaveLength(2);
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
    const byVar = Object.fromEntries(problems.map((p) => [p.path, p]));
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
    expect(byVar['RETRYQ_CREDENTIALS[0].id']?.received).toBe('Bad Id');
    expect(byVar['RETRYQ_DEV_PORT']?.message).toContain('1 to 65535');
    expect(byVar['RETRYQ_DEFAULT_DEADLINE']?.message).toContain("'30s'");
  });

  it('explains a budget that cannot work: the inspection reserve must leave dispatch a positive rate', () => {
    const problems = problemsOf(
      creds([
        { id: 'a', secretEnv: 'A_KEY', requestsPerMinute: 10, inspectReserve: 10 },
        { id: 'b', secretEnv: 'B_KEY', inspectReserve: 2.5 },
        { id: 'c', secretEnv: 'C_KEY', requestsPerMinute: 1 },
      ]),
    );
    const byVar = Object.fromEntries(problems.map((p) => [p.path, p]));
    expect(byVar['RETRYQ_CREDENTIALS[0].inspectReserve']?.message).toBe(
      'inspectReserve 10 reserves 10 of the 10 requests per minute for inspections, leaving dispatch 0; reserve less ' +
        '(at most 9 per minute, or a share below 0.950) or raise requestsPerMinute',
    );
    expect(byVar['RETRYQ_CREDENTIALS[1].inspectReserve']?.message).toContain('must be a whole number');
    expect(byVar['RETRYQ_CREDENTIALS[2].requestsPerMinute']?.message).toContain('at least 2');
    expect(Object.keys(byVar)).toHaveLength(3);
  });

  it('reads the metrics port, 0 turning the endpoint off and unset leaving the choice to the command', () => {
    expect(loadConfig({}).metricsPort).toBeUndefined();
    expect(loadConfig({ RETRYQ_METRICS_PORT: '0' }).metricsPort).toBe(0);
    expect(loadConfig({ RETRYQ_METRICS_PORT: '9100' }).metricsPort).toBe(9100);
    expect(problemsOf({ RETRYQ_METRICS_PORT: 'x' })[0]?.path).toBe('RETRYQ_METRICS_PORT');
  });

  it('rejects malformed JSON with an example of the expected shape', () => {
    const [p] = problemsOf({ RETRYQ_CREDENTIALS: '[{id: acme}]' });
    expect(p?.path).toBe('RETRYQ_CREDENTIALS');
    expect(p?.message).toContain('JSON array');
  });

  it('rejects unknown fields such as an inline secret, without echoing other fields', () => {
    const problems = problemsOf(creds([{ id: 'a', secretEnv: 'A_KEY', secret: 'sk_live_123' }]));
    expect(problems[0]?.path).toBe('RETRYQ_CREDENTIALS[0]');
    expect(problems[0]?.message).toMatch(/secret/);
    expect(JSON.stringify(problems)).not.toContain('sk_live_123');
  });

  it('rejects duplicate credential ids', () => {
    const problems = problemsOf(
      creds([
        { id: 'a', secretEnv: 'A' },
        { id: 'a', secretEnv: 'B' },
      ]),
    );
    expect(problems).toEqual([{ path: 'RETRYQ_CREDENTIALS[1].id', message: 'must be unique', received: 'a' }]);
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
      expect((err as ConfigError).problems.map((p) => p.path)).toEqual(['B_KEY']);
      expect((err as Error).message).not.toContain('sk_live_visible?');
    }
  });
});

describe('loadConfig worker sizing', () => {
  it("bounds the workflow cache, workflow-task slots and the workflow thread's heap by default, and gives back a burst's heap", () => {
    expect(loadConfig({}).worker).toEqual({
      maxCachedWorkflows: 100,
      workflowTaskConcurrency: 40,
      stickyQueueTimeoutMs: 5_000,
      workflowThreadSemiSpaceMb: 2,
      workflowThreadOldSpaceMb: 512,
      heapReleaseAfterBurstMb: 16,
      wakeUpsPerSecond: 10,
    });
  });

  it("reads RETRYQ_WORKFLOW_OLD_SPACE_MB (0: V8's own limit) and names the rule for a bad value", () => {
    expect(loadConfig({ RETRYQ_WORKFLOW_OLD_SPACE_MB: '2048' }).worker.workflowThreadOldSpaceMb).toBe(2048);
    expect(loadConfig({ RETRYQ_WORKFLOW_OLD_SPACE_MB: '0' }).worker.workflowThreadOldSpaceMb).toBe(0);
    expect(problemsOf({ RETRYQ_WORKFLOW_OLD_SPACE_MB: '32' })).toEqual([
      {
        path: 'RETRYQ_WORKFLOW_OLD_SPACE_MB',
        received: '32',
        message: "must be 0 (V8's own limit) or from 64 to 65536 (MB)",
      },
    ]);
    expect(problemsOf({ RETRYQ_WORKFLOW_OLD_SPACE_MB: '1GB' })).toEqual([
      { path: 'RETRYQ_WORKFLOW_OLD_SPACE_MB', received: '1GB', message: 'must be a whole number' },
    ]);
  });

  it('reads RETRYQ_HEAP_RELEASE_AFTER_BURST_MB (0: off) and names the rule for a bad value', () => {
    expect(loadConfig({ RETRYQ_HEAP_RELEASE_AFTER_BURST_MB: '64' }).worker.heapReleaseAfterBurstMb).toBe(64);
    expect(loadConfig({ RETRYQ_HEAP_RELEASE_AFTER_BURST_MB: '0' }).worker.heapReleaseAfterBurstMb).toBe(0);
    expect(problemsOf({ RETRYQ_HEAP_RELEASE_AFTER_BURST_MB: '-5' })).toEqual([
      { path: 'RETRYQ_HEAP_RELEASE_AFTER_BURST_MB', received: '-5', message: 'must be 0 (off) or more' },
    ]);
    expect(problemsOf({ RETRYQ_HEAP_RELEASE_AFTER_BURST_MB: '10000' })).toEqual([
      { path: 'RETRYQ_HEAP_RELEASE_AFTER_BURST_MB', received: '10000', message: 'must be at most 4096 (MB)' },
    ]);
  });

  it('brings the default workflow-task slots down to a smaller cache set alone, and keeps them when both are set', () => {
    expect(loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '20' }).worker.workflowTaskConcurrency).toBe(20);
    expect(loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '0' }).worker.workflowTaskConcurrency).toBe(40);
    expect(
      loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '20', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '8' }).worker
        .workflowTaskConcurrency,
    ).toBe(8);
  });

  it("reads RETRYQ_WORKFLOW_SEMI_SPACE_MB (0: V8's own sizing) and names the rule for a bad value", () => {
    expect(loadConfig({ RETRYQ_WORKFLOW_SEMI_SPACE_MB: '8' }).worker.workflowThreadSemiSpaceMb).toBe(8);
    expect(loadConfig({ RETRYQ_WORKFLOW_SEMI_SPACE_MB: '0' }).worker.workflowThreadSemiSpaceMb).toBe(0);
    expect(problemsOf({ RETRYQ_WORKFLOW_SEMI_SPACE_MB: '-1' })).toEqual([
      { path: 'RETRYQ_WORKFLOW_SEMI_SPACE_MB', received: '-1', message: "must be 0 (V8's own sizing) or more" },
    ]);
    expect(problemsOf({ RETRYQ_WORKFLOW_SEMI_SPACE_MB: '1024' })).toEqual([
      { path: 'RETRYQ_WORKFLOW_SEMI_SPACE_MB', received: '1024', message: 'must be at most 256 (MB)' },
    ]);
    expect(problemsOf({ RETRYQ_WORKFLOW_SEMI_SPACE_MB: '2MB' })).toEqual([
      { path: 'RETRYQ_WORKFLOW_SEMI_SPACE_MB', received: '2MB', message: 'must be a whole number' },
    ]);
  });

  it('reads RETRYQ_STICKY_QUEUE_TIMEOUT_MS and names the rule for a value out of range', () => {
    expect(loadConfig({ RETRYQ_STICKY_QUEUE_TIMEOUT_MS: '10000' }).worker.stickyQueueTimeoutMs).toBe(10_000);
    expect(problemsOf({ RETRYQ_STICKY_QUEUE_TIMEOUT_MS: '10' })).toEqual([
      { path: 'RETRYQ_STICKY_QUEUE_TIMEOUT_MS', received: '10', message: 'must be at least 1000 (ms)' },
    ]);
  });

  it("reads RETRYQ_WAKE_UPS_PER_SECOND (0: the credential's budget alone) and names the rule for a bad value", () => {
    expect(loadConfig({ RETRYQ_WAKE_UPS_PER_SECOND: '40' }).worker.wakeUpsPerSecond).toBe(40);
    expect(loadConfig({ RETRYQ_WAKE_UPS_PER_SECOND: '0' }).worker.wakeUpsPerSecond).toBe(0);
    expect(problemsOf({ RETRYQ_WAKE_UPS_PER_SECOND: '-5' })).toEqual([
      {
        path: 'RETRYQ_WAKE_UPS_PER_SECOND',
        received: '-5',
        message: "must be 0 (the credential's budget alone spreads wake-ups) or more",
      },
    ]);
    expect(problemsOf({ RETRYQ_WAKE_UPS_PER_SECOND: '2.5' })).toEqual([
      { path: 'RETRYQ_WAKE_UPS_PER_SECOND', received: '2.5', message: 'must be a whole number' },
    ]);
  });

  it('reads RETRYQ_MAX_CACHED_WORKFLOWS and RETRYQ_WORKFLOW_TASK_CONCURRENCY', () => {
    const c = loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '2000', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '40' });
    expect(c.worker).toEqual({
      maxCachedWorkflows: 2000,
      workflowTaskConcurrency: 40,
      stickyQueueTimeoutMs: 5_000,
      workflowThreadSemiSpaceMb: 2,
      workflowThreadOldSpaceMb: 512,
      heapReleaseAfterBurstMb: 16,
      wakeUpsPerSecond: 10,
    });
    expect(loadConfig({ RETRYQ_MAX_CACHED_WORKFLOWS: '0' }).worker.maxCachedWorkflows).toBe(0);
  });

  it('names the variable, the value and the rule for every bad value', () => {
    expect(problemsOf({ RETRYQ_MAX_CACHED_WORKFLOWS: 'lots', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '1.5' })).toEqual([
      { path: 'RETRYQ_MAX_CACHED_WORKFLOWS', message: 'must be a whole number', received: 'lots' },
      { path: 'RETRYQ_WORKFLOW_TASK_CONCURRENCY', message: 'must be a whole number', received: '1.5' },
    ]);
    expect(problemsOf({ RETRYQ_MAX_CACHED_WORKFLOWS: '1' })).toEqual([
      {
        path: 'RETRYQ_MAX_CACHED_WORKFLOWS',
        received: '1',
        message: 'must be 0 (no cache: every workflow task replays) or at least 2',
      },
    ]);
    expect(problemsOf({ RETRYQ_MAX_CACHED_WORKFLOWS: '20', RETRYQ_WORKFLOW_TASK_CONCURRENCY: '40' })).toEqual([
      {
        path: 'RETRYQ_WORKFLOW_TASK_CONCURRENCY',
        received: '40',
        message: 'must not exceed the cache size (20): a running workflow task needs its workflow in the cache',
      },
    ]);
  });
});
