/**
 * The error tree of memvault, as the Python package's `memvault_base.errors`
 * has it, with one leaf of this client's own (`ForeignSocket`):
 *
 *     MemvaultError
 *     ├── InvalidArgument     the request is malformed; nothing was changed
 *     ├── NotFound            no memory with that id
 *     ├── IntegrityError      ciphertext failed to authenticate: tampered or corrupt
 *     ├── Locked              the vault key is not available (no keyring, no passphrase)
 *     ├── Unavailable         the daemon cannot be reached or is not ready
 *     │   └── ForeignSocket   the socket is not one the current user's daemon made
 *     ├── ResourceExhausted   a size or space limit was hit
 *     └── RollbackDetected    a remote showed an older or forked history
 *
 * A failed call raises the class its gRPC status code names (`errorOf`),
 * with the daemon's own message, which names what was wrong.
 */

import { status } from "@grpc/grpc-js";

/** Something went wrong in memvault. */
export class MemvaultError extends Error {
  /** The gRPC status code the daemon answered with, when it did. */
  readonly code: status | undefined;

  constructor(message: string, code?: status) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** The request is malformed; nothing was changed. */
export class InvalidArgument extends MemvaultError {}

/** No such memory. */
export class NotFound extends MemvaultError {}

/** Data failed to authenticate: it was tampered with or is corrupt. Nothing from it was used. */
export class IntegrityError extends MemvaultError {}

/** The vault key is not available: unlock the keyring or provide the passphrase. */
export class Locked extends MemvaultError {}

/** The daemon is not running or not ready. */
export class Unavailable extends MemvaultError {}

/**
 * The path where the daemon's socket should be is not a socket of the current
 * user: another user's process could read every memory sent to it, so the
 * client does not connect.
 */
export class ForeignSocket extends Unavailable {}

/** The caller's declared access (scopes, topics, read-only) does not reach what it asked for. */
export class PermissionDenied extends MemvaultError {}

/** A size or space limit was reached. */
export class ResourceExhausted extends MemvaultError {}

/** The remote showed an older or different history than this device has seen; sync stopped. */
export class RollbackDetected extends MemvaultError {}

type ErrorClass = new (message: string, code?: status) => MemvaultError;

// memvault_base.errors.CODE_OF, read the other way.
const ERROR_OF: ReadonlyMap<status, ErrorClass> = new Map<status, ErrorClass>([
  [status.INVALID_ARGUMENT, InvalidArgument],
  [status.NOT_FOUND, NotFound],
  [status.PERMISSION_DENIED, PermissionDenied],
  [status.DATA_LOSS, IntegrityError],
  [status.FAILED_PRECONDITION, Locked],
  [status.UNAVAILABLE, Unavailable],
  [status.DEADLINE_EXCEEDED, Unavailable],
  [status.RESOURCE_EXHAUSTED, ResourceExhausted],
  [status.ABORTED, RollbackDetected],
]);

/** The error a client raises for a call that failed with status `code`. */
export function errorOf(code: status, message: string): MemvaultError {
  const cls = ERROR_OF.get(code) ?? MemvaultError;
  return new cls(message, code);
}
