/**
 * `Connection`: the channel to the daemon's socket under every client call,
 * as the Python package's `memvault.connection` makes it.
 *
 * It checks the socket (socket-check.ts), waits for the channel to connect
 * within CONNECT_TIMEOUT_MS, runs each call with its deadline, and turns every
 * failed call into the error `errorOf` names. The only judgement it makes is
 * telling "the daemon is not running" apart from "the daemon said no".
 */

import * as fs from "node:fs";

import {
  ChannelOptions,
  ClientReadableStream,
  connectivityState,
  credentials,
  Metadata,
  ServiceError,
  status,
} from "@grpc/grpc-js";

import { MemvaultError, Unavailable, errorOf } from "./errors";
import { MemoryClient } from "./gen/memvault_base/v1/memory";
import { checkSocket, notRunning } from "./socket-check";

// A connect to a local unix socket completes in well under a millisecond; 5 s
// only bounds the case of a daemon that accepted the connection and hung.
export const CONNECT_TIMEOUT_MS = 5_000;

// memvault_base.limits.MAX_MESSAGE: a recall of 1000 hits with vectors is
// ~2-3 MB, close to gRPC's 4 MiB default.
const MAX_MESSAGE = 64 * 1024 * 1024;

const CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.max_receive_message_length": MAX_MESSAGE,
  "grpc.max_send_message_length": MAX_MESSAGE,
  // grpc's reconnect backoff grows to 120 s by default; a restarted local
  // daemon should be found again within a second.
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
};

// The trailing metadata the daemon sends with every error it answers
// (memvault_base.rpc.ANSWERED): without it, an UNAVAILABLE was made up by
// grpc-js on this side, because the transport failed.
const ANSWERED_KEY = "memvault-answered";
const ANSWERED_VALUE = "memvaultd";

// The access a client declares with every call (memvault_base.access; the
// daemon enforces it, docs/scopes.md).
const ACCESS_SCOPES = "memvault-scopes";
const ACCESS_TOPICS = "memvault-topics";
const ACCESS_READ_ONLY = "memvault-read-only";

export interface Access {
  scopes: string[];
  topics: string[];
  readOnly: boolean;
}

const NO_DECLARATION: Access = { scopes: [], topics: [], readOnly: false };

type UnaryMethod<Req, Resp> = (
  request: Req,
  metadata: Metadata,
  options: { deadline: number },
  callback: (error: ServiceError | null, response: Resp) => void,
) => unknown;

export class Connection {
  readonly socket: string;
  /** Each call's deadline, in milliseconds. */
  readonly timeoutMs: number;
  protected readonly stub: MemoryClient;
  private readonly access: Access;
  private connecting: Promise<void> | undefined;
  private closed = false;

  constructor(socket: string, timeoutMs: number, access: Access = NO_DECLARATION) {
    this.socket = socket;
    this.timeoutMs = timeoutMs;
    this.access = access;
    this.stub = new MemoryClient(`unix://${socket}`, credentials.createInsecure(), CHANNEL_OPTIONS);
  }

  /** Close the channel; open event streams end. */
  close(): void {
    this.closed = true;
    this.stub.close();
  }

  /** Fail fast, with a message that says what to do, when no daemon answers. */
  protected connect(): Promise<void> {
    if (this.closed) {
      return Promise.reject(new Unavailable("this memvault client is closed"));
    }
    // Once per client: after that grpc-js reconnects on its own, and a call
    // on a broken connection fails at once, which `translate` reports.
    this.connecting ??= this.firstConnect().catch((err: unknown) => {
      this.connecting = undefined;
      throw err;
    });
    return this.connecting;
  }

  private async firstConnect(): Promise<void> {
    checkSocket(this.socket);
    const channel = this.stub.getChannel();
    const deadline = Date.now() + CONNECT_TIMEOUT_MS;
    let state = channel.getConnectivityState(true);
    while (state === connectivityState.IDLE || state === connectivityState.CONNECTING) {
      const changed = await new Promise<boolean>((resolve) => {
        channel.watchConnectivityState(state, deadline, (err?: Error) => resolve(err === undefined));
      });
      if (!changed) {
        break;
      }
      state = channel.getConnectivityState(true);
    }
    switch (state) {
      case connectivityState.READY:
        return;
      case connectivityState.TRANSIENT_FAILURE:
        throw new Unavailable(notRunning(`socket at ${this.socket} refuses connections`));
      case connectivityState.SHUTDOWN:
        throw new Unavailable("this memvault client is closed");
      default:
        throw new Unavailable(
          `memvault daemon at ${this.socket} did not accept a connection within ` +
            `${CONNECT_TIMEOUT_MS / 1000} s; it may be hung. Restart it (\`memvaultd\`)`,
        );
    }
  }

  protected async unary<Req, Resp>(method: UnaryMethod<Req, Resp>, request: Req): Promise<Resp> {
    await this.connect();
    return new Promise<Resp>((resolve, reject) => {
      const options = { deadline: Date.now() + this.timeoutMs };
      method.call(this.stub, request, this.metadata(), options, (err, reply) => {
        if (err) {
          reject(this.translate(err));
        } else {
          resolve(reply);
        }
      });
    });
  }

  protected async stream<Req, Resp>(
    method: (request: Req, metadata: Metadata) => ClientReadableStream<Resp>,
    request: Req,
  ): Promise<ClientReadableStream<Resp>> {
    await this.connect();
    return method.call(this.stub, request, this.metadata());
  }

  /** The declared access, as memvault_base.access writes it: nothing for full access. */
  private metadata(): Metadata {
    const metadata = new Metadata();
    if (this.access.scopes.length > 0) {
      metadata.set(ACCESS_SCOPES, this.access.scopes.join(","));
    }
    if (this.access.topics.length > 0) {
      metadata.set(ACCESS_TOPICS, this.access.topics.join(","));
    }
    if (this.access.readOnly) {
      metadata.set(ACCESS_READ_ONLY, "1");
    }
    return metadata;
  }

  /** The memvault error for a failed call. */
  translate(err: ServiceError): MemvaultError {
    const details = err.details ?? err.message;
    if (err.code === status.UNAVAILABLE && !answered(err)) {
      const why = fs.existsSync(this.socket) ? "connection lost to" : "no socket at";
      return new Unavailable(notRunning(`${why} ${this.socket}: ${details}`), err.code);
    }
    if (err.code === status.DEADLINE_EXCEEDED) {
      return new Unavailable(
        `memvault daemon at ${this.socket} did not answer within ${this.timeoutMs / 1000} s`,
        err.code,
      );
    }
    return errorOf(err.code, details);
  }
}

function answered(err: ServiceError): boolean {
  return err.metadata?.get(ANSWERED_KEY).includes(ANSWERED_VALUE) ?? false;
}
