/**
 * The check made before connecting: the daemon's socket exists, is a socket,
 * and belongs to the current user.
 *
 * The daemon refuses peers of another uid (memvaultd's peer gate); this is
 * the same rule the other way round. A socket another user made where ours
 * should be (a MEMVAULT_HOME in a shared directory, say) would receive every
 * memory and query this client sends, so the client refuses it before a byte
 * leaves. The daemon makes its socket's directory 0700, so the socket cannot
 * be swapped between this check and the connect.
 */

import * as fs from "node:fs";

import { ForeignSocket, Unavailable } from "./errors";

export const START_HINT = "Start it with `memvaultd` or ./scripts/run";

export function notRunning(why: string): string {
  return `memvault daemon is not running (${why}). ${START_HINT}`;
}

/** Throws Unavailable when there is no socket at `socket`, ForeignSocket when it is not ours. */
export function checkSocket(socket: string): void {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(socket);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new Unavailable(notRunning(`no socket at ${socket}`));
    }
    throw new Unavailable(`cannot reach the memvault socket at ${socket}: ${(err as Error).message}`);
  }
  if (!stat.isSocket()) {
    throw new ForeignSocket(
      `${socket} is not a socket, so no memvault daemon listens there; ` +
        `remove it and start the daemon (\`memvaultd\`)`,
    );
  }
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    throw new ForeignSocket(
      `the memvault socket at ${socket} belongs to uid ${stat.uid}, not to you (uid ${uid}); ` +
        `refusing to send memories to another user's process. ` +
        `Check MEMVAULT_HOME and XDG_RUNTIME_DIR, or start your own daemon`,
    );
  }
}
