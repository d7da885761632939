"""The `memvault` command line: one module of commands per family, over `memvault.Client`.

`main.py` is the command group and its exit codes; `*_commands.py` the
commands; `options.py`, `input.py`, `context.py` and `output.py` what they
share; `mcp_bridge.py` the MCP server for agents; `service.py` and
`doctor.py` the set-up commands. It imports the client package and the base
package, never the daemon.
"""
