"""The tools the model calls: the contract every tool implements (``base``), the built-in set
(``builtin``: read, write, edit, bash, grep, find, ls, todo, each in its own module), and what
they share: no-follow file access (``safefs``), path resolution and diffs (``files``), ignore-aware
file discovery (``walk``), output truncation (``truncate``), bash in the editor's terminal
(``bash_terminal``).
"""
