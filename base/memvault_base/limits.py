"""The size every memvault process bounds one API message by.

One number for the client's channel, the front process's grpc server and
the daemon's link behind it (`memvaultd.serve.front.link`), so that what
one side sends the other accepts. 64 MiB: a RememberBatch of 10,000
memories with their vectors is ~40 MB, and a recall of 1,000 hits with
vectors ~2-3 MB, close to grpc's 4 MiB default. A message over it is
refused unread (RESOURCE_EXHAUSTED).
"""

from __future__ import annotations

__all__ = ["MAX_MESSAGE"]

MAX_MESSAGE = 64 * 1024 * 1024
