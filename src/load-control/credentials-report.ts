/**
 * What `retryq credentials` shows and does: each credential configured here or whose load control is active (a
 * worker has called with it, so its entity workflow runs), with whether live workers serve it, its budget split,
 * gate and block (from its entity workflow), its in-flight and waiting intents (from visibility), and `resume`
 * after a quota block.
 *
 * @example
 * ```ts
 * const rows = await credentialsReport({ client, prefix: 'retryq', credentials: config.credentials });
 * console.log(formatCredentials(rows));
 * await resumeCredential({ client, prefix: 'retryq', credential: 'acme-prod' });
 * ```
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { budgetOf } from '../credential-config.js';
import type { CredentialConfig } from '../credential-config.js';
import type { BudgetSplit } from '../policy/index.js';
import { credentialStateQuery, credentialWorkflowId, resumeUpdate, retryNowSignal } from '../workflows/index.js';
import type { CredentialState } from '../workflows/index.js';
import { workflowIdOf } from '../workflow-ids.js';
import { CredentialNotFoundError } from '../errors.js';
import { activeCredentials, credentialServing } from '../served-credentials.js';

/** One gate as reported: open, or closed until a time. */
export interface GateReport {
  state: 'open' | 'closed';
  /** ISO, when closed. */
  closedUntil: string | null;
  /** What closed it last (also after it opened again). */
  reason: string | null;
}

/** One credential's load-control state. */
export interface CredentialReport {
  credential: string;
  /** Whether it is in this process's configuration (`RETRYQ_CREDENTIALS`); else it was found by its load control. */
  configured: boolean;
  /** Whether a live worker polls its dispatch queue now; `undefined` when the server cannot say. */
  served: boolean | undefined;
  /** Worker processes polling its dispatch queue. */
  pollers: number;
  /** The split: configured here, else the one its load control runs with. */
  budget: BudgetSplit;
  /**
   * The budget learned from the provider's rate-limit headers that slots are paced at instead, while it holds, and
   * where it came from (`learned from RateLimit-Policy: 60 per 60 s`).
   */
  learned: { budget: BudgetSplit; until: string; reason: string } | null;
  /** The dispatch gate (closed after a rate-limit answer, until the permitted time). */
  gate: GateReport;
  /** The inspection gate (inspections run within their reserve while dispatches are gated). */
  inspectGate: GateReport;
  /** Set after a quota or spending-limit answer until `retryq credentials resume`. */
  blocked: { reason: string; since: string } | null;
  /** Intents of this credential dispatching or inspecting now (queued for or in a provider call). */
  inFlight: number;
  /** Intents of this credential waiting (for a Retry-After, backoff, the gate, a slot, or a resume). */
  waiting: number;
  /** Whether the credential's entity exists (it is created by the first call). */
  active: boolean;
  /** Calls let through and held since the entity started. */
  counters: CredentialState['counters'] | null;
}

export interface ReportOptions {
  client: Client;
  /** @default 'retryq' */
  prefix?: string;
  credentials: readonly CredentialConfig[];
  /**
   * Also report the credentials whose load control is active (at most 100): those the running workers have called
   * with, whether or not this process is configured with them. @default true
   */
  discover?: boolean;
  /** @default Date.now */
  now?: () => number;
}

async function countOf(client: Client, query: string): Promise<number> {
  try {
    return (await client.workflow.count(query)).count;
  } catch {
    return 0;
  }
}

function gateOf(g: CredentialState['gates']['dispatch'] | undefined, nowMs: number): GateReport {
  const until = g?.closedUntil ? Date.parse(g.closedUntil) : 0;
  return until > nowMs
    ? { state: 'closed', closedUntil: g?.closedUntil ?? null, reason: g?.reason ?? null }
    : { state: 'open', closedUntil: null, reason: g?.reason ?? null };
}

/** The report of every configured credential and, unless `discover` is false, of every active one, sorted by id. */
export async function credentialsReport(options: ReportOptions): Promise<CredentialReport[]> {
  const { client } = options;
  const prefix = options.prefix ?? 'retryq';
  const now = (options.now ?? Date.now)();
  const configured = new Map(options.credentials.map((c) => [c.id, c]));
  const active = options.discover === false ? [] : await activeCredentials(client, prefix, 100);
  const ids = [...new Set([...configured.keys(), ...active])].sort();
  const rows = await Promise.all(
    ids.map(async (id): Promise<CredentialReport | undefined> => {
      let state: CredentialState | undefined;
      try {
        state = await client.workflow.getHandle(credentialWorkflowId(id, options.prefix)).query(credentialStateQuery);
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      const config = configured.get(id);
      const budget = config ? budgetOf(config) : state?.budget;
      if (!budget) return undefined; // ended between the list and the query, and not configured here
      const running = `Credential = "${id}" AND ExecutionStatus = "Running"`;
      const [inFlight, waiting, serving] = await Promise.all([
        countOf(client, `${running} AND RetryPhase IN ("dispatching", "inspecting", "scheduled")`),
        countOf(client, `${running} AND RetryPhase = "waiting"`),
        credentialServing(client, prefix, id).catch(() => ({ served: undefined, pollers: 0 })),
      ]);
      return {
        credential: id,
        configured: config !== undefined,
        served: serving.served,
        pollers: serving.pollers,
        budget,
        learned: state?.learned && Date.parse(state.learned.until) > now ? state.learned : null,
        gate: gateOf(state?.gates.dispatch, now),
        inspectGate: gateOf(state?.gates.inspect, now),
        blocked: state?.blocked ? { reason: state.blocked.reason, since: state.blocked.since } : null,
        inFlight,
        waiting,
        active: state !== undefined,
        counters: state?.counters ?? null,
      };
    }),
  );
  return rows.filter((r): r is CredentialReport => r !== undefined);
}

const time = (iso: string) => `${iso.slice(11, 19)} UTC`;
const round = (perMinute: number) => String(Math.round(perMinute * 100) / 100);

/** The report as a table for people. */
export function formatCredentials(rows: readonly CredentialReport[]): string {
  if (rows.length === 0)
    return (
      'No credentials: none is configured here (RETRYQ_CREDENTIALS), and no worker has called with one yet ' +
      '(a credential is listed once its load control is active).'
    );
  const lines = rows.map((r) => {
    const b = r.budget;
    const gate =
      r.gate.state === 'closed'
        ? `rate limited until ${time(r.gate.closedUntil ?? '')}${r.gate.reason ? ` (${r.gate.reason})` : ''}`
        : 'open';
    const blocked = r.blocked ? `BLOCKED since ${time(r.blocked.since)}: ${r.blocked.reason}` : 'not blocked';
    const workers =
      r.served === undefined
        ? 'the server cannot say which workers serve it'
        : r.served
          ? `served by ${r.pollers} live worker${r.pollers === 1 ? '' : 's'}`
          : 'no live worker serves it';
    return [
      `${r.credential}`,
      `  workers    ${workers}${r.configured ? '' : ' (not configured in this process)'}`,
      `  budget     ${b.totalPerMinute}/min: dispatch ${b.dispatchPerMinute}/min while inspections run, inspections ${b.inspectPerMinute}/min reserved`,
      ...(r.learned
        ? [
            `  paced at   ${round(r.learned.budget.totalPerMinute)}/min until ${time(r.learned.until)} (${r.learned.reason})`,
          ]
        : []),
      `  gate       ${gate}${r.inspectGate.state === 'closed' ? `; inspections rate limited until ${time(r.inspectGate.closedUntil ?? '')}` : ''}`,
      `  blocked    ${blocked}${r.blocked ? ` — run \`retryq credentials resume ${r.credential}\` once the limit is lifted` : ''}`,
      `  intents    ${r.inFlight} in flight, ${r.waiting} waiting`,
      r.counters
        ? `  calls      ${r.counters.granted.dispatch} dispatches and ${r.counters.granted.inspect} inspections let through${r.counters.leased ? ` (and ${r.counters.leased} dispatch slots leased ahead to worker processes)` : ''}, ${r.counters.held.dispatch + r.counters.held.inspect} held, ${r.counters.gateClosures} gate closures`
        : '  calls      none yet',
    ].join('\n');
  });
  return lines.join('\n\n');
}

/** One line for a live progress display: `acme-prod: gate closed until 12:03:07 UTC · not blocked · 4 in flight, 20 waiting`. */
export function credentialLine(r: CredentialReport): string {
  const gate = r.gate.state === 'closed' ? `gate closed until ${time(r.gate.closedUntil ?? '')}` : 'gate open';
  const blocked = r.blocked ? `BLOCKED (${r.blocked.reason})` : 'not blocked';
  const budget = r.learned ? `${round(r.learned.budget.totalPerMinute)}/min learned` : `${r.budget.totalPerMinute}/min`;
  return `${r.credential}: ${budget} · ${gate} · ${blocked} · ${r.inFlight} in flight, ${r.waiting} waiting`;
}

/**
 * Lifts a credential's block and wakes its waiting intents at once (they would otherwise look again within a few
 * minutes). Returns what the block was and how many intents were woken.
 */
export async function resumeCredential(options: {
  client: Client;
  prefix?: string;
  credential: string;
}): Promise<{ wasBlocked: { reason: string; since: string } | null; woken: number }> {
  const { client, credential } = options;
  let wasBlocked: { reason: string; since: string } | null;
  try {
    const result = await client.workflow
      .getHandle(credentialWorkflowId(credential, options.prefix))
      .executeUpdate(resumeUpdate, { args: [{ by: 'retryq credentials resume' }] });
    wasBlocked = result.wasBlocked ? { reason: result.wasBlocked.reason, since: result.wasBlocked.since } : null;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new CredentialNotFoundError(credential);
    throw err;
  }
  let woken = 0;
  for await (const wf of client.workflow.list({
    query: `Credential = "${credential}" AND RetryPhase = "waiting" AND ExecutionStatus = "Running"`,
  })) {
    if (!wf.workflowId.startsWith(workflowIdOf(''))) continue;
    try {
      await client.workflow.getHandle(wf.workflowId).signal(retryNowSignal);
      woken++;
    } catch {
      // Ended meanwhile.
    }
  }
  return { wasBlocked, woken };
}
