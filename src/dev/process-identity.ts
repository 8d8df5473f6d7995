/**
 * Who a process id belongs to: its start time and command line. A pid alone is not an identity (the OS reuses
 * pids), so retryq only ever signals a process it recorded earlier when the start time and the command line it
 * recorded still match. Linux reads `/proc`; elsewhere `ps` answers.
 *
 * @example
 * ```ts
 * import { processIdentity } from './process-identity.js';
 * const me = await processIdentity(process.pid); // { startTime: '…', args: 'node …' }
 * ```
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** What identifies a running process beyond its pid. */
export interface ProcessIdentity {
  /** When it started, in the OS's own terms (clock ticks since boot on Linux, `ps`'s lstart elsewhere). */
  startTime: string;
  /** Its command line, arguments joined by spaces. */
  args: string;
  /** Linux only: stopped by a signal (SIGSTOP, SIGTSTP) or a debugger. */
  stopped?: boolean;
}

/** The identity of a live process, or `undefined` when no process has this pid. */
export async function processIdentity(pid: number): Promise<ProcessIdentity | undefined> {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (process.platform === 'linux') {
    try {
      const [stat, cmdline] = await Promise.all([
        readFile(`/proc/${pid}/stat`, 'utf8'),
        readFile(`/proc/${pid}/cmdline`, 'utf8'),
      ]);
      // Fields after the command name, which is in parentheses and may itself hold spaces or parentheses.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const state = fields[0];
      if (state === 'Z' || state === 'X') return undefined; // a zombie is gone, only not reaped yet
      return {
        startTime: fields[19] ?? '',
        args: cmdline.split('\0').filter(Boolean).join(' '),
        stopped: state === 'T' || state === 't',
      };
    } catch {
      return undefined;
    }
  }
  try {
    const { stdout } = await execFileAsync('ps', ['-o', 'lstart=', '-o', 'args=', '-p', String(pid)]);
    const line = stdout.trim();
    if (!line) return undefined;
    // lstart is a fixed-width date ("Tue Dec  1 03:52:45 2026"): 24 characters.
    return { startTime: line.slice(0, 24).trim(), args: line.slice(24).trim() };
  } catch {
    return undefined;
  }
}

/** True when the process still runs with the recorded identity (same start time, same command line). */
export async function isSameProcess(pid: number, recorded: Pick<ProcessIdentity, 'startTime'>): Promise<boolean> {
  const now = await processIdentity(pid);
  return now !== undefined && now.startTime === recorded.startTime;
}
