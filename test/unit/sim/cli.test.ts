import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { request } from 'undici';
import { parseProviderSimArgs, runProviderSimCli } from '../../../src/sim/index.js';

const mainPath = fileURLToPath(new URL('../../../src/sim/main.ts', import.meta.url));
const examplePath = fileURLToPath(new URL('../../../src/sim/scenarios/example.yaml', import.meta.url));

describe('provider-sim flags', () => {
  it('default to port 0 on 127.0.0.1 with no overrides', () => {
    expect(parseProviderSimArgs([])).toEqual({
      help: false,
      port: 0,
      host: '127.0.0.1',
      scenarioFile: undefined,
      overrides: {},
    });
  });

  it('map each scenario flag onto its scenario field', () => {
    const options = parseProviderSimArgs([
      '--port=4010',
      '--scenario',
      'x.yaml',
      '--rate-limit-per-minute',
      '60',
      '--retry-after-format',
      'http-date',
      '--clock-offset-ms=-1500',
      '--webhook-url',
      'http://127.0.0.1:9999/hooks',
    ]);
    expect(options).toMatchObject({
      port: 4010,
      scenarioFile: 'x.yaml',
      overrides: {
        rateLimitPerMinute: 60,
        retryAfterFormat: 'http-date',
        clockOffsetMs: -1500,
        webhookUrl: 'http://127.0.0.1:9999/hooks',
      },
    });
  });

  it.each([
    [['--port', 'abc'], /--port expects an integer from 0 to 65535 \(got "abc"\)/],
    [['--port', '70000'], /--port expects an integer/],
    [['--rate-limit-per-minute', '0'], /--rate-limit-per-minute expects an integer from 1/],
    [['--retry-after-format', 'minutes'], /--retry-after-format expects 'seconds' or 'http-date' \(got "minutes"\)/],
    [['--webhook-url', 'nope'], /--webhook-url expects an http/],
    [
      ['--rate-limit-algorithm', 'leaky'],
      /--rate-limit-algorithm expects one of sliding-window, fixed-window, token-bucket \(got "leaky"\)/,
    ],
    [['--rate-limit-headers', 'x-ratelimit'], /--rate-limit-headers expects one of none, ietf, ietf-draft/],
    [['--colour'], /Unknown option '--colour'/],
    [['extra'], /Unexpected argument 'extra'/],
    [['--clock-offset-ms', '-5'], /--clock-offset-ms=-XYZ/],
  ])('reject %j with a message naming the flag', (argv, message) => {
    expect(() => parseProviderSimArgs(argv)).toThrow(message);
  });
});

describe('runProviderSimCli', () => {
  it('exits 2 with the usage for a bad flag', async () => {
    const err: string[] = [];
    const code = await runProviderSimCli(['--port', 'x'], { stdout: () => undefined, stderr: (l) => err.push(l) });
    expect(code).toBe(2);
    expect(err.join('\n')).toMatch(/--port expects[\s\S]*Usage:/);
  });

  it('exits 2 naming the field for an invalid scenario file, and for a missing one', async () => {
    const err: string[] = [];
    const io = { stdout: () => undefined, stderr: (l: string) => err.push(l) };
    const dir = await mkdtemp(join(tmpdir(), 'provider-sim-cli-'));
    try {
      const file = join(dir, 'bad.yaml');
      await writeFile(file, 'retryAfterFormat: minutes\n');
      expect(await runProviderSimCli(['--scenario', file], io)).toBe(2);
      expect(err.pop()).toMatch(
        /bad\.yaml \(1 problem\):\n {2}- retryAfterFormat: .*"seconds"\|"http-date" \(got "minutes"\)/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await runProviderSimCli(['--scenario', '/nonexistent/s.yaml'], io)).toBe(2);
    expect(err.pop()).toMatch(/cannot read the scenario file/);
  });

  it('prints the URL, serves the scenario with flags applied, and exits 0 on shutdown', async () => {
    let stop!: () => void;
    const shutdown = new Promise<void>((resolve) => (stop = resolve));
    let printed!: (line: string) => void;
    const firstLine = new Promise<string>((resolve) => (printed = resolve));
    const exit = runProviderSimCli(['--scenario', examplePath, '--rate-limit-per-minute', '42'], {
      stdout: (l) => printed(l),
      stderr: () => undefined,
      shutdown,
    });
    const url = await firstLine;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await request(`${url}/_sim/scenario`);
    const scenario = (await res.body.json()) as { rateLimitPerMinute: number; retryAfterFormat: string };
    expect(scenario).toMatchObject({ rateLimitPerMinute: 42, retryAfterFormat: 'http-date' });
    stop();
    expect(await exit).toBe(0);
  });
});

describe('runProviderSimCli with rate-limit flags', () => {
  it('sets the algorithm and headers inside rateLimit and keeps the file’s buckets', async () => {
    const out: string[] = [];
    let stop!: () => void;
    const shutdown = new Promise<void>((resolve) => (stop = resolve));
    const bucketsPath = fileURLToPath(new URL('../../../src/sim/scenarios/route-buckets.yaml', import.meta.url));
    const exit = runProviderSimCli(
      ['--scenario', bucketsPath, '--rate-limit-algorithm', 'token-bucket', '--rate-limit-headers', 'ietf'],
      { stdout: (l) => out.push(l), stderr: () => undefined, shutdown },
    );
    await vi.waitFor(() => expect(out.length).toBeGreaterThan(0), { timeout: 5000, interval: 5 });
    const res = await request(`${out[0] ?? ''}/_sim/scenario`);
    const scenario = (await res.body.json()) as {
      rateLimit: { algorithm: string; headers: string; buckets: unknown[] };
    };
    expect(scenario.rateLimit).toMatchObject({ algorithm: 'token-bucket', headers: 'ietf' });
    expect(scenario.rateLimit.buckets).toHaveLength(2);
    stop();
    expect(await exit).toBe(0);
  });
});

describe('src/sim/main.ts as a process', () => {
  function run(args: string[]) {
    return spawn(process.execPath, ['--import', 'tsx', mainPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  }
  const exitCode = (child: ReturnType<typeof run>): Promise<number | null> =>
    new Promise((resolve) => child.once('exit', (code) => resolve(code)));

  it('prints its URL on stdout and closes cleanly with exit code 0 on SIGTERM', async () => {
    const child = run(['--port', '0']);
    const exited = exitCode(child);
    const lines = createInterface({ input: child.stdout });
    const url = await new Promise<string>((resolve) => lines.once('line', resolve));
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await request(`${url}/v1/charges`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk_test_acme', 'content-type': 'application/json' },
      body: '{}',
    });
    await res.body.dump();
    expect(res.statusCode).toBe(201);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('exits with code 2 and a clear message for an unknown flag', async () => {
    const child = run(['--bogus']);
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    expect(await exitCode(child)).toBe(2);
    expect(stderr).toMatch(/provider-sim: Unknown option '--bogus'/);
  });
});
