/**
 * `MemvaultClient`: remember, recall, get, forget and events over the
 * daemon's unix socket, the Python `memvault.Client`'s calls of the same names.
 */

import { Connection } from "./connection";
import { EventStream } from "./events";
import { absolute, socketPath } from "./paths";
import * as wire from "./types";
import type { Hits, Memory, RecallOptions, RememberOptions, RememberResult } from "./types";

export interface ClientOptions {
  /** The daemon's socket; default: the one `home` names. */
  socket?: string;
  /** Keep to the daemon of this MEMVAULT_HOME; default: $MEMVAULT_HOME, else the platform's. */
  home?: string;
  /** Each call's deadline, in seconds (default 30). */
  timeout?: number;
  /**
   * The scopes this client works in (docs/scopes.md): it sees them and `user`,
   * and writes only in them. Default: every scope.
   */
  scopes?: string[];
  /** Topic patterns it may reach (`work.*`, `work`, `*`). Default: every topic. */
  topics?: string[];
  /** Refuse every call that changes anything. */
  readOnly?: boolean;
}

export class MemvaultClient extends Connection {
  /** Finds the socket as the daemon does (paths.ts) unless `socket` names it. */
  constructor(options: ClientOptions = {}) {
    const socket = options.socket !== undefined ? absolute(options.socket) : socketPath(options.home);
    super(socket, (options.timeout ?? 30) * 1000, {
      scopes: options.scopes ?? [],
      topics: options.topics ?? [],
      readOnly: options.readOnly ?? false,
    });
  }

  /**
   * Store a memory; the daemon compares it with the memories of its type and
   * topic: the same statement again reinforces the earlier memory, a changed
   * fact supersedes it, anything else is added (`result.outcome`).
   * A text that looks like it holds a credential is refused with
   * InvalidArgument naming its kind, unless `allowSecret`.
   */
  async remember(text: string, options: RememberOptions = {}): Promise<RememberResult> {
    const memory = wire.memoryInput(text, options);
    const reply = await this.unary(this.stub.remember, { memory });
    return wire.rememberResult(reply);
  }

  /** The memories that best answer `query`, best first; empty when none do. */
  async recall(query: string, options: RecallOptions = {}): Promise<Hits> {
    const reply = await this.unary(this.stub.recall, wire.recallRequest(query, options));
    return wire.hits(reply);
  }

  /** The memory with this id; rejects with NotFound when there is none. */
  async get(id: string, options: { includeVector?: boolean } = {}): Promise<Memory> {
    const reply = await this.unary(this.stub.get, { id, includeVector: options.includeVector ?? false });
    return wire.memory(reply.memory);
  }

  /**
   * Move the memory with this id to the trash, on every synced device
   * (`purge`: erase it for good at once); resolves to the write's txid.
   * `by` is what the trash shows as having forgotten it ("" = "client").
   */
  async forget(id: string, options: { purge?: boolean; by?: string } = {}): Promise<number> {
    const request = { id, filterJson: "", dryRun: false, purge: options.purge ?? false, by: options.by ?? "" };
    return (await this.unary(this.stub.forget, request)).txid;
  }

  /**
   * Stream what the daemon does ("hit", "miss", "remember", "forget",
   * "restore", "ready"; `types` keeps those alone) until `cancel()`.
   */
  async events(types: string[] = []): Promise<EventStream> {
    const call = await this.stream(this.stub.events, { types });
    return new EventStream(call, (err) => this.translate(err));
  }
}
