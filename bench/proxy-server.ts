/**
 * The proxy of `npm run bench:proxy`, in its own process: `retryq proxy` exactly as the CLI runs it
 * (arguments as for `retryq proxy`). Prints `retryq proxy listening on URL`; stops on SIGTERM.
 *
 * @example
 * ```sh
 * node --import tsx bench/proxy-server.ts --upstream up=http://127.0.0.1:41234 --port 0
 * ```
 */
import { proxyCommand } from '../src/proxy/command.js';

process.exitCode = await proxyCommand(process.argv.slice(2), {
  out: (s) => process.stdout.write(s + '\n'),
  err: (s) => process.stderr.write(s + '\n'),
});
