/**
 * The simulator's socket life: listen on a host and port, stop (refusing connections, destroying
 * open ones) and resume on the same port, outages that do both on a timer (from the scenario or on
 * request), and closing. Listen and stop calls run one after another, never interleaved.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** The listening side of one `node:http` server. */
export class Listener {
  #port: number;
  readonly #sockets = new Set<Socket>();
  readonly #outageTimers = new Set<NodeJS.Timeout>();
  #resume:
    { timer: NodeJS.Timeout; promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } | undefined;
  #chain: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(
    readonly server: Server,
    readonly host: string,
    port: number,
    /** Where errors of timer-started outages go. */
    readonly onError: (error: unknown) => void,
  ) {
    this.#port = port;
    server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  /** The port listened on (the one the OS chose, after listening on 0). */
  get port(): number {
    return this.#port;
  }

  get listening(): boolean {
    return this.server.listening;
  }

  #serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(task, task);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => {
        this.server.off('listening', onListening);
        reject(error);
      };
      const onListening = (): void => {
        this.server.off('error', onError);
        const address = this.server.address();
        if (address && typeof address === 'object') this.#port = address.port;
        resolve();
      };
      this.server.once('error', onError);
      this.server.once('listening', onListening);
      this.server.listen(this.#port, this.host);
    });
  }

  #destroySockets(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }

  stopListening(): Promise<void> {
    return this.#serial(async () => {
      if (this.server.listening) {
        const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
        this.#destroySockets();
        await closed;
      }
      this.#destroySockets();
    });
  }

  resumeListening(): Promise<void> {
    return this.#serial(async () => {
      if (this.#closed) throw new Error('the provider simulator is closed');
      if (!this.server.listening) await this.listen();
    });
  }

  async outage(durationMs: number): Promise<{ resumed: Promise<void> }> {
    if (!Number.isFinite(durationMs) || durationMs < 0)
      throw new RangeError(`outage duration must be ≥ 0 ms, got ${durationMs}`);
    if (this.#closed) throw new Error('the provider simulator is closed');
    await this.stopListening();
    let resume = this.#resume;
    if (resume) {
      clearTimeout(resume.timer);
    } else {
      let resolve!: () => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      promise.catch(() => undefined);
      resume = { timer: setTimeout(() => undefined, 0), promise, resolve, reject };
      this.#resume = resume;
    }
    const current = resume;
    current.timer = setTimeout(() => {
      this.#resume = undefined;
      this.resumeListening().then(current.resolve, current.reject);
    }, durationMs);
    return { resumed: current.promise };
  }

  /** Replaces the scheduled outages with these, counted from now. */
  scheduleOutages(outages: readonly { afterMs: number; durationMs: number }[]): void {
    this.#clearOutages();
    if (this.#closed) return;
    for (const { afterMs, durationMs } of outages) {
      const timer = setTimeout(() => {
        this.#outageTimers.delete(timer);
        this.outage(durationMs).catch(this.onError);
      }, afterMs);
      this.#outageTimers.add(timer);
    }
  }

  #clearOutages(): void {
    for (const timer of this.#outageTimers) clearTimeout(timer);
    this.#outageTimers.clear();
  }

  /** Cancels outages (a pending resume rejects), stops listening and destroys every socket. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#clearOutages();
    if (this.#resume) {
      clearTimeout(this.#resume.timer);
      this.#resume.reject(new Error('the provider simulator closed during an outage'));
      this.#resume = undefined;
    }
    await this.stopListening();
  }
}
