"""What a session knows of its project: context files such as AGENTS.md (``project``), slash
commands and prompt templates (``commands``), skills (``skills``), and the Markdown front
matter they are written with (``frontmatter``).
"""
