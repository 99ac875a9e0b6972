"""Bridges between the two worlds: any registered env served as an MCP server, and any MCP task
driven as a Gymnasium env.

Serving (one idea per module):

* ``tool_server``: the one recipe every Gauntlet MCP server is built with (``ToolSet``, ``ToolServer``),
  and its error policy; ``tool_errors``: what the agent is told when a call fails;
* ``env_server`` (on ``env_sessions``): any Gymnasium env as an MCP server, and its operator's control server;
* ``targets``: a server by name (``env:<ENV_ID>`` or a registered server); ``serving``: run servers
  until stopped (``run_target`` is ``gauntlet serve``); ``ports``, ``stdio``, ``server_logging``: the
  HTTP port, the stdin reader, where the log goes; ``server_process``: servers in child processes;
* ``mcp_compat``: every use of the MCP SDK's internals, with its version check; ``validation``: the
  compiled schema validators it installs.

Driving: ``mcp_client`` (a blocking MCP client) and ``tool_task_env`` (an MCP task as a Gymnasium env).
"""
