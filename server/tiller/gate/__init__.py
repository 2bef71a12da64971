"""The permission gate: which tool calls run, wait for the user's answer or are denied
(``permissions``), what a shell command is made of (``shell``), and the editor as the resource
that answers questions and serves files (``editor``).
"""
