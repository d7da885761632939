/**
 * Where the daemon's socket is: the rule of the Python package's
 * `memvault_base.paths.resolve`, so that a TypeScript client finds the socket
 * the daemon bound without being told (tests/test_typescript_client.py
 * compares the two under each rule).
 *
 * 1. `home`, else `$MEMVAULT_HOME` (an empty value counts as unset):
 *    `HOME/run/memvault.sock`.
 * 2. Else `$XDG_RUNTIME_DIR/memvault/memvault.sock`.
 * 3. Else the data directory's `run/`: `$XDG_DATA_HOME/memvault/run/memvault.sock`
 *    when XDG_DATA_HOME is an absolute path, else under the platform's data
 *    directory (`~/.local/share/memvault`, on macOS
 *    `~/Library/Application Support/memvault`), as platformdirs has it.
 *
 * The result has `~` expanded and is absolute, as the Python client's
 * `Connection` makes it.
 */

import * as os from "node:os";
import * as path from "node:path";

export const SOCKET_NAME = "memvault.sock";

/** The daemon's socket for `home`, else `$MEMVAULT_HOME`, else the platform's. */
export function socketPath(home?: string, env: NodeJS.ProcessEnv = process.env): string {
  const chosen = home || env.MEMVAULT_HOME || "";
  if (chosen) {
    return absolute(path.join(expandUser(chosen, env), "run", SOCKET_NAME), env);
  }
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime) {
    return absolute(path.join(runtime, "memvault", SOCKET_NAME), env);
  }
  return absolute(path.join(userDataDir(env), "run", SOCKET_NAME), env);
}

/** `path` with a leading `~` or `~/` made the user's home, then made absolute. */
export function absolute(p: string, env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(expandUser(p, env));
}

function expandUser(p: string, env: NodeJS.ProcessEnv): string {
  if (p !== "~" && !p.startsWith("~/")) {
    return p;
  }
  // Python's expanduser takes $HOME as it is when set, else the passwd entry.
  const home = env.HOME !== undefined ? env.HOME : os.userInfo().homedir;
  return home + p.slice(1);
}

function userDataDir(env: NodeJS.ProcessEnv): string {
  const xdg = env.XDG_DATA_HOME ?? "";
  if (path.isAbsolute(xdg)) {
    return path.join(xdg, "memvault");
  }
  // platformdirs treats a relative $HOME as unset and asks the passwd entry.
  const home = env.HOME && path.isAbsolute(env.HOME) ? env.HOME : os.userInfo().homedir;
  const base = process.platform === "darwin"
    ? path.join(home, "Library", "Application Support")
    : path.join(home, ".local", "share");
  return path.join(base, "memvault");
}
