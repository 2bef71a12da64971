"""Hooks: the user's commands run at points of a session, in Claude Code's settings format
(settings: the files; run: one command; output: what it said; trust: the workspace's files
run only once trusted; session_hooks: a session's hooks, run and reported)."""
