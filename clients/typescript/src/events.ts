/** `EventStream`: the daemon's events as `MemvaultClient.events()` streams them. */

import { ClientReadableStream, ServiceError, status } from "@grpc/grpc-js";

import type { MemvaultError } from "./errors";
import type * as pb from "./gen/memvault_base/v1/memory";
import type { MemvaultEvent } from "./types";

/**
 * The daemon's events as they happen, for `for await`; the loop ends when the
 * stream is cancelled (`cancel()`, alias `close()`) or the client closed.
 */
export class EventStream implements AsyncIterable<MemvaultEvent> {
  private cancelled = false;

  constructor(
    private readonly call: ClientReadableStream<pb.Event>,
    private readonly translate: (err: ServiceError) => MemvaultError,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<MemvaultEvent> {
    try {
      for await (const event of this.call) {
        yield event as pb.Event;
      }
    } catch (err) {
      const failure = err as ServiceError;
      if (this.cancelled || failure.code === status.CANCELLED) {
        return;
      }
      throw this.translate(failure);
    }
  }

  cancel(): void {
    this.cancelled = true;
    this.call.cancel();
  }

  close(): void {
    this.cancel();
  }
}
