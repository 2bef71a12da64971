"""``tiller chat`` and ``tiller run``'s command line: the parser, and what the options mean
for the server (its arguments, the workspace, the log and history files) and for the prompt.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from tiller.config import default_data_dir, provider_help
from tiller.modes import PERMISSION_MODES, SANDBOX_MODES, THINKING_LEVELS

__all__ = [
    "build_parser", "history_file", "log_file", "one_shot_prompt", "server_args", "workspace",
]


EPILOG = """\
interactive keys:
  a line while the agent works   steer it (delivered after the running tools)
  a line ending with \\           continue the message on the next line
  >> a line                      queue it as a follow-up, for when the agent would stop
  Ctrl-C                         abort the run; at the prompt, clear the line (twice: quit)
  y, a, n or v at "Allow?"       allow the tool call once or always, reject it once or always
  /help                          the chat's commands and the session's
  /model, /mode, /thinking       show or switch the model, permission mode, reasoning effort
  /compact, /new, /sessions      compact the context, start a session, list saved ones
  /continue [ID]                 go on after an error or abort; with ID, switch to a session
  /changes                       the files the agent changed in this session
  /undo                          put back what the last run changed (asks first)
  Ctrl-D or /quit                quit

exit status with -p: 0 the reply is complete (stop, toolUse); 1 an error, an abort, a turn or
token limit, or a reply cut at the output token limit (length); 2 a configuration error"""


RUN_DESCRIPTION = (
    "Run the Tiller agent once on PROMPT (or -p PROMPT, or a prompt on stdin, after PROMPT if "
    "both are given), print its reply (--json: its events as JSON lines) and exit; the exit "
    "status says how the run ended. Nobody is asked: the permission mode is auto unless given."
)


def build_parser(run: bool = False) -> argparse.ArgumentParser:
    """``tiller chat``'s command line; with ``run``, ``tiller run``'s (one-shot only)."""
    parser = argparse.ArgumentParser(
        prog="tiller run" if run else "tiller chat",
        description=RUN_DESCRIPTION if run else "Chat with the Tiller agent in a terminal. With "
        "stdin not a terminal and no -p, stdin (after PROMPT, if given) is the prompt of one run.",
        epilog=EPILOG.split("\n\n")[-1].replace(" with -p:", ":") if run else EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("prompt", nargs="?", metavar="PROMPT", help="the first message")
    add("-p", "--print", dest="once", metavar="PROMPT", help="run PROMPT once, print, exit")
    add("--json", action="store_true",
        help="events as JSON lines" if run else "with -p or piped stdin: events as JSON lines")
    add("--resume", nargs="?", const="", metavar="SESSION_ID",
        help="continue a saved session: SESSION_ID, or the workspace's latest")
    if not run:  # typed lines: interactive only
        add("--history-file", help="typed lines, for Up/Down across chats (default: "
            "$XDG_DATA_HOME/tiller/chat_history)")
    server = parser.add_argument_group("server options (passed to tiller)").add_argument
    server("--provider", help=provider_help(os.environ))
    server("--model", help="model name (for --provider local: a GGUF file's path)")
    server("--base-url", help="provider base URL, e.g. a local server's")
    server("--cwd", help="workspace root (default: the current directory)")
    server("--config", help="config file (default: $XDG_CONFIG_HOME/tiller/config.toml)")
    server("--thinking", choices=THINKING_LEVELS, help="reasoning effort (default: off)")
    server("--permission-mode", choices=PERMISSION_MODES,
           help="default: auto" if run else
           "default: ask when interactive, auto with -p or piped stdin")
    server("--sandbox", choices=SANDBOX_MODES,
           help="where commands run: workspace-write (default), read-only, off, required")
    server("--max-turns", type=int, help="per-run limit on model calls (default 50)")
    server("--session-dir", help="session logs (default: $XDG_DATA_HOME/tiller/sessions)")
    server("--no-session", action="store_true", help="keep sessions in memory only")
    server("--log-file", help="the server's logs and errors (default: "
           "$XDG_DATA_HOME/tiller/chat.log), never the screen")
    return parser


def history_file(options: argparse.Namespace, env: Mapping[str, str]) -> Path:
    """Where typed lines are kept between chats: ``--history-file``, else in the data dir."""
    if getattr(options, "history_file", None):
        return Path(options.history_file).expanduser().resolve()
    return default_data_dir(env) / "chat_history"


def log_file(options: argparse.Namespace, env: Mapping[str, str]) -> Path:
    """Where the server's logs go: ``--log-file``, else ``chat.log`` in Tiller's data dir."""
    if options.log_file:
        return Path(options.log_file).expanduser().resolve()
    return default_data_dir(env) / "chat.log"


SERVER_OPTIONS = ("provider", "model", "base_url", "cwd", "config", "thinking",
                  "permission_mode", "sandbox", "max_turns", "session_dir")


def server_args(options: argparse.Namespace) -> list[str]:
    """The server's command line: the pass-through options that were given."""
    args = []
    for name in SERVER_OPTIONS:
        value = getattr(options, name)
        if value is not None:
            args += ["--" + name.replace("_", "-"), str(value)]
    return [*args, "--no-session"] if options.no_session else args


def workspace(options: argparse.Namespace) -> str:
    """The workspace root as an absolute path (the server's cwd is this process's)."""
    return os.path.abspath(os.path.expanduser(options.cwd or "."))


def one_shot_prompt(options: argparse.Namespace, stdin: TextIO, run: bool = False) -> str | None:
    """The prompt of a one-shot run: -p, else (stdin not a terminal) PROMPT and stdin, else
    for ``tiller run`` PROMPT; None for interactive mode."""
    if options.once is not None:
        return str(options.once)
    if stdin.isatty():
        return options.prompt if run else None
    parts = [options.prompt or "", stdin.read()]
    return "\n\n".join(part.strip("\n") for part in parts if part.strip())
