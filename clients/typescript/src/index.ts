/**
 * memvault's TypeScript client: `MemvaultClient` over the daemon's unix
 * socket, the error tree, and the socket rule it shares with the Python
 * client. `proto` is the generated code of the whole API (its messages and
 * the grpc-js `MemoryClient`), for the calls the wrapper does not cover.
 */

export { MemvaultClient } from "./client";
export type { ClientOptions } from "./client";
export { CONNECT_TIMEOUT_MS } from "./connection";
export {
  ForeignSocket,
  IntegrityError,
  InvalidArgument,
  Locked,
  MemvaultError,
  NotFound,
  PermissionDenied,
  ResourceExhausted,
  RollbackDetected,
  Unavailable,
  errorOf,
} from "./errors";
export { EventStream } from "./events";
export * as proto from "./gen/memvault_base/v1/memory";
export { SOCKET_NAME, socketPath } from "./paths";
export type {
  Hit,
  Hits,
  JsonObject,
  Memory,
  MemvaultEvent,
  RecallOptions,
  RememberOptions,
  RememberResult,
} from "./types";
