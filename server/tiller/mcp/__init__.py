"""Tiller as an MCP client: servers from the config file and from ``session/new``, their tools
offered to the model as ``mcp__<server>__<tool>``, their prompts as the slash commands
``/mcp__<server>__<prompt>``.

``config``: what a server entry says (parsed and checked). ``tool``: one MCP tool as a Tiller
``Tool``, its results mapped to tool-result content. ``prompts``: the servers' prompts as a
command source. ``client``: the servers of one session,
started together on first need, each its own connection, closed with the session.
"""
