"""Live sessions: ``Session`` (one conversation: its agent, log recorder, permission gate,
checkpoints and MCP servers; the fronts' door to all of them), the registry that creates,
loads, forks, closes and deletes sessions (``registry``), the session's plan (``plan``), and
what new sessions will offer, for ``initialize`` (``capabilities``).
"""
