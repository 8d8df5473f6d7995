/**
 * CLI entry of the provider simulator.
 *
 * @example
 * ```sh
 * tsx src/sim/main.ts --port 4010 --scenario src/sim/scenarios/example.yaml
 * ```
 */
import { runProviderSimCli } from './cli.js';

process.exitCode = await runProviderSimCli(process.argv.slice(2), {
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
});
