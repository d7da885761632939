"""Claude Code hooks: what `memvault hooks run EVENT` makes of the JSON
Claude Code sends, and the entries `memvault hooks install` writes into its
settings (docs/hooks.md).

- `events`: the hook's input, parsed, and the event names on both sides;
- `answers`: the output Claude Code documents (context to add, a warning);
- `project`: the project a working directory belongs to (its name, its git
  remote);
- `injection`: what session start and each prompt add to the agent's
  context, within a token budget;
- `transcript`: the new turns of a session's transcript file;
- `offsets`: how far each session's transcript was read;
- `decisions`: what a user asked to remember, and their corrections;
- `capture`: Stop and PreCompact, storing turns and decisions;
- `settings`: the entries in Claude Code's settings, merged and removed;
- `vault`: the one `Client` the hooks make;
- `runner`: one hook run, failing open.

May import `memvault`'s client and `memvault_base`; never `memvault.cli`
(which imports this package) and never the daemon.
"""
