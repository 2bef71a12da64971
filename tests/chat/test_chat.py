"""``tiller chat``: the real command, run as a subprocess against the loopback OpenAI server.

One-shot mode runs with pipes; interactive mode runs on a pseudo-terminal (``Terminal``), which
the tests type into and read from until a marker appears, never sleeping to synchronize:
steering, follow-ups, Ctrl-C, permission questions and ``--resume``. Sessions are saved under
the test's directory. The renderer's styling rules are checked in-process at the end.
"""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pyte
import pytest

from support.fake_openai import (
    FakeOpenAI,
    Reply,
    error_reply,
    paused_reply,
    stall_reply,
    text_reply,
    tool_call_reply,
)
from support.helpers import UNSANDBOXED, clean_env, roles
from support.terminal import (
    DEADLINE,
    Terminal,
    chat_argv,
    run_chat,
)
from tiller.chat.checkpoints import CONFIRM_UNDO
from tiller.chat.cli import build_parser, server_args
from tiller.chat.render import ASK_PROMPT, Renderer
from tiller.providers.embedded import CHAT_ONLY_NOTICE


@pytest.fixture
def terminal_factory(tmp_path: Path) -> Iterator[Callable[..., Terminal]]:
    """Starts ``tiller chat`` on a pseudo-terminal; kills what is left at teardown."""
    terminals: list[Terminal] = []

    def start(fake: FakeOpenAI, *args: str, **env: str) -> Terminal:
        terminals.append(Terminal(chat_argv(fake, tmp_path, *args), tmp_path, **env))
        return terminals[-1]

    yield start
    for terminal in terminals:
        terminal.close()


# ---------------------------------------------------------------------------------------------
# One-shot


@pytest.mark.process
def test_print_mode_streams_the_reply(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(text_reply("Hello from the fake model, in pieces.", chunk_size=3))
    done = run_chat(fake_openai, tmp_path, "-p", "say hello")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello from the fake model, in pieces.\n"  # no ANSI: not a terminal
    assert "↳ 10 in · 5 out" in done.stderr
    assert fake_openai.requests[0]["messages"][-1] == {"role": "user", "content": "say hello"}


@pytest.mark.process
def test_piped_stdin_is_the_prompt(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(text_reply("Summarized."))
    done = subprocess.run(
        chat_argv(fake_openai, tmp_path, "summarize this:"), input="line one\nline two\n",
        env=clean_env(), capture_output=True, text=True, timeout=DEADLINE,
    )

    assert done.returncode == 0, done.stderr
    assert "Summarized." in done.stdout
    prompt = fake_openai.requests[0]["messages"][-1]["content"]
    assert prompt == "summarize this:\n\nline one\nline two"


@pytest.mark.process
def test_json_mode_prints_events_then_a_result(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(text_reply("Scripted."))
    done = run_chat(fake_openai, tmp_path, "-p", "hi", "--json")

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    *events, result = lines
    types = [event["type"] for event in events]
    assert {"agent_start", "message_update", "agent_end", "agent_settled"} <= set(types)
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    text = "".join(e["delta"] for e in events if e["type"] == "message_update")
    assert text == "Scripted."
    assert result["type"] == "result" and result["stopReason"] == "stop"
    assert result["usage"]["inputTokens"] == 10


@pytest.mark.process
def test_a_tool_round_is_rendered(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    command = "for i in 1 2 3 4 5 6 7 8; do echo out-$i; done"
    fake_openai.enqueue(
        tool_call_reply([("call_1", "bash", {"command": command})], text="Looking."),
        text_reply("All eight printed."),
    )
    done = run_chat(fake_openai, tmp_path, "-p", "count")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index(f"⚙ bash: {command}")
    assert lines[start - 1] == "Looking."
    assert lines[start + 1 : start + 9] == [
        "✓ bash", "  out-1", "  out-2", "  out-3", "  out-4", "  out-5", "  out-6",
        "  … 2 more lines",
    ]
    assert lines[-1] == "All eight printed."


@pytest.mark.process
def test_a_failed_run_exits_1_with_the_error(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(error_reply(400, "this model does not exist"))
    done = run_chat(fake_openai, tmp_path, "-p", "hi")

    assert done.returncode == 1
    assert "✗ error:" in done.stderr and "this model does not exist" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.process
@pytest.mark.parametrize("json_mode", [False, True])
def test_no_api_key_is_a_configuration_error(tmp_path: Path, json_mode: bool) -> None:
    extra = ["--json"] if json_mode else []
    done = run_chat(None, tmp_path, "--provider", "openai", "-p", "hi", *extra)

    assert done.returncode == 2
    assert "no API key: set OPENAI_API_KEY" in done.stderr and "--base-url" in done.stderr
    assert "Traceback" not in done.stderr
    if json_mode:
        result = json.loads(done.stdout.splitlines()[-1])
        assert result["type"] == "result" and result["errorCode"] == -32014


@pytest.mark.process
def test_tiller_run_is_the_one_shot_for_scripts(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    """What the README shows: `tiller run PROMPT --json` ends with a `stop` result line."""
    fake_openai.enqueue(text_reply("Two files."))
    argv = run_argv(fake_openai, tmp_path, "List the files here", "--json")
    done = subprocess.run(argv, env=clean_env(), cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=DEADLINE)

    assert done.returncode == 0, done.stderr
    *events, result = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "agent_start" and result["stopReason"] == "stop"
    assert fake_openai.requests[0]["messages"][-1]["content"] == "List the files here"


def run_argv(fake: FakeOpenAI | None, cwd: Path, *args: str) -> list[str]:
    argv = chat_argv(fake, cwd, *args)
    argv[argv.index("chat")] = "run"
    argv.remove("--history-file")  # a chat-only option: tiller run has none
    argv.remove(str(cwd / ".chat_history"))
    return argv


@pytest.mark.process
@pytest.mark.parametrize(
    ("reply", "status", "warning"),
    [
        (text_reply("All of it."), 0, None),
        (text_reply("Cut off in the mid", finish_reason="length"), 1,
         "⚠ the reply was cut off at the output token limit"),
        (error_reply(400, "no such model"), 1, "✗ error:"),
    ],
    ids=["stop", "length", "error"],
)
def test_tiller_run_exit_status_says_whether_the_reply_is_complete(
    fake_openai: FakeOpenAI, tmp_path: Path, reply: Reply, status: int, warning: str | None
) -> None:
    """As the README and ``tiller run --help`` say: 0 for a complete reply, 1 for one cut at
    the output limit (a script must not take it for the answer), an error or an abort."""
    fake_openai.enqueue(reply)
    done = subprocess.run(run_argv(fake_openai, tmp_path, "say it"), env=clean_env(),
                          cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=DEADLINE)

    assert done.returncode == status, done.stderr
    if warning:
        assert warning in done.stderr
    assert "Traceback" not in done.stderr


def test_help_lists_the_commands_and_run_has_no_chat_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tiller.__main__ import main

    def help_of(*argv: str) -> str:
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--help"])
        assert exited.value.code == 0
        return capsys.readouterr().out

    server = help_of()
    assert "tiller {chat,run,schema} ..." in server
    for line in ("tiller chat [PROMPT]", "tiller run PROMPT", "tiller schema"):
        assert f"\n  {line}" in server
    run, chat = help_of("run"), help_of("chat")
    assert "--history-file" in chat and "interactive keys:" in chat
    assert "--history-file" not in run and "interactive keys:" not in run
    assert "steer" not in run and "ask when interactive" not in run
    assert "exit status: 0 the reply is complete" in run
    assert "reply cut at the output token limit (length)" in run


@pytest.mark.process
def test_server_logs_go_to_the_data_dir_never_the_screen(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(text_reply("Quiet."))
    argv = [a for a in chat_argv(fake_openai, tmp_path, "-p", "hi") if a != "--log-file"]
    argv.remove(str(tmp_path / ".chat.log"))
    env = clean_env(TILLER_LOG_LEVEL="DEBUG", XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run(argv, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=DEADLINE)

    assert done.returncode == 0, done.stderr
    assert "DEBUG" not in done.stdout + done.stderr
    assert " DEBUG " in (tmp_path / "data" / "tiller" / "chat.log").read_text()


@pytest.mark.process
def test_a_server_that_refuses_its_command_line_says_why(tmp_path: Path) -> None:
    done = run_chat(None, tmp_path, "--config", str(tmp_path / "missing.toml"), "-p", "hi")

    assert done.returncode == 2
    assert "missing.toml does not exist" in done.stderr.splitlines()[-1]
    assert "does not exist" in (tmp_path / ".chat.log").read_text()


@pytest.mark.process
def test_ctrl_c_aborts_a_print_run(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never sent", gate=gate))
    process = subprocess.Popen(
        chat_argv(fake_openai, tmp_path, "-p", "wait"), env=clean_env(), cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    fake_openai.wait_for_requests(1, timeout=DEADLINE)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=DEADLINE)

    assert process.returncode == 1
    assert "✗ aborted" in stderr and "Traceback" not in stderr
    assert "never sent" not in stdout


# ---------------------------------------------------------------------------------------------
# Interactive, on a pseudo-terminal


@pytest.mark.process
def test_typing_while_a_tool_runs_steers(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    os.mkfifo(tmp_path / "release")
    fake_openai.enqueue(
        tool_call_reply([("call_wait", "bash", {"command": "cat release"})]),
        text_reply("Steered answer."),
    )
    terminal = terminal_factory(fake_openai, "--permission-mode", "auto")
    terminal.idle()
    terminal.type("do the work\n")
    terminal.expect("⚙ bash: cat release")
    terminal.type("use tabs instead\n")
    terminal.expect("↪ steering queued")
    (tmp_path / "release").write_text("released\n")  # blocks until cat has it open
    terminal.expect("✓ bash")
    terminal.expect("↪ delivered: use tabs instead")  # where the model got it
    terminal.expect("Steered answer.")
    terminal.idle()
    terminal.type("\x04")  # Ctrl-D at the prompt

    assert terminal.wait() == 0
    second = fake_openai.requests[1]
    assert roles(second) == ["system", "user", "assistant", "tool", "user"]
    assert second["messages"][3]["content"].strip() == "released"
    assert second["messages"][4]["content"] == "use tabs instead"


@pytest.mark.process
def test_text_typed_while_a_reply_streams_stays_on_the_input_line(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    until = threading.Event()
    fake_openai.enqueue(
        stall_reply("First line done.\nSecond li", until=until),  # then the connection drops
        text_reply("Whole reply."),  # the retry
        text_reply("Got it."),
    )
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("tell me\n")
    terminal.expect("Second li")  # a streamed line not finished yet
    terminal.type("abc")
    # finished lines go through prompt_toolkit's stdout proxy, which writes them a moment later
    lines = terminal.expect_screen(lambda lines: "> abc" in lines and "First line done." in lines,
                                   "'> abc' on the input line, the finished line above")
    assert "First line done." in lines and "Second li" in lines
    assert [line for line in lines if "abc" in line] == ["> abc"]
    until.set()
    terminal.expect("Whole reply.")
    terminal.idle()
    lines = terminal.expect_screen(lambda lines: "> abc" in lines, "'> abc' still typed")
    assert [line for line in lines if "abc" in line] == ["> abc"]  # never in the transcript
    terminal.type("\n")  # sent now, as the next prompt
    terminal.expect("Got it.")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    assert fake_openai.requests[-1]["messages"][-1] == {"role": "user", "content": "abc"}
    assert len(fake_openai.requests) == 3


@pytest.mark.process
def test_the_status_line_and_a_retry_countdown(
    tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    """The status line names the model the --base-url server serves (its /v1/models), here
    one the catalog prices."""
    with FakeOpenAI(models=("gpt-6.1-terra",)) as fake:
        fake.enqueue(
            error_reply(503, "overloaded", headers={"retry-after": "2"}),
            text_reply("Answered after the retry."),
        )
        terminal = terminal_factory(fake)
        terminal.expect("openai/gpt-6.1-terra · ask · session ")
        terminal.expect("0 tokens · $0.0000")
        terminal.idle()
        terminal.type("hi\n")
        terminal.expect("overloaded")
        terminal.expect("retry 1 of 3 in 2s")
        terminal.expect("retry 1/3 in ")  # the countdown on the activity line
        terminal.expect("Answered after the retry.")
        terminal.expect("⟳ the retry worked")
        terminal.expect("↳ 10 in · 5 out · $0.000035")
        terminal.expect("openai/gpt-6.1-terra · ask · session ")
        terminal.expect("15 tokens · $0.0000")
        terminal.idle()
        terminal.type("\x04")
        assert terminal.wait() == 0
    fake.assert_script_complete()


@pytest.mark.process
def test_multi_line_messages_and_history_across_chats(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    fake_openai.enqueue(text_reply("Two lines."), text_reply("Again."))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("first line\\\n")
    terminal.expect("… ")
    terminal.type("second line\n")
    terminal.expect("Two lines.")
    terminal.idle()
    terminal.type("\x04")
    assert terminal.wait() == 0

    again = terminal_factory(fake_openai)
    again.idle()
    again.type("\x1b[A")  # Up: the last line typed in the previous chat
    again.expect("second line")
    again.type("\n")
    again.expect("Again.")
    again.idle()
    again.type("\x04")
    assert again.wait() == 0

    first, second = fake_openai.requests
    assert first["messages"][-1]["content"] == "first line\nsecond line"
    assert second["messages"][-1]["content"] == "second line"


@pytest.mark.process
def test_the_input_history_and_the_log_are_the_users_alone(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    """What was typed (the input history) and the server's log (an error may quote it) are
    made 0600 in folders made 0700, as the session logs are; a history an older Tiller left
    readable to others becomes private; a folder that was there keeps its mode."""
    fake_openai.enqueue(text_reply("Noted."))
    history = tmp_path / "mine" / "history"
    history.parent.mkdir(mode=0o755)
    history.write_text("\n# 2026-12-01 10:00:00\n+an old line\n")
    history.chmod(0o644)
    log = tmp_path / "new" / "logs" / "chat.log"
    terminal = terminal_factory(fake_openai, "--history-file", str(history), "--log-file",
                                str(log))
    terminal.idle()
    terminal.type("the password is hunter2\n")
    terminal.expect("Noted.")
    terminal.idle()
    terminal.type("\x04")
    assert terminal.wait() == 0

    assert "+the password is hunter2" in history.read_text()
    modes = {path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode)
             for path in (history, history.parent, log, log.parent, log.parent.parent)}
    assert modes == {"mine/history": 0o600, "mine": 0o755 & ~_umask(),
                     "new/logs/chat.log": 0o600, "new/logs": 0o700, "new": 0o700}


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.process
def test_esc_enter_starts_a_new_line_in_the_message(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    fake_openai.enqueue(text_reply("Both lines."))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("line one\x1b\rline two")  # Esc Enter: a new line in the message, not sent
    terminal.expect_screen(
        lambda lines: "> line one\nline two" in "\n".join(lines),
        "both lines on the input line",
    )
    terminal.type("\r")
    terminal.expect("Both lines.")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    [request] = fake_openai.requests
    assert request["messages"][-1]["content"] == "line one\nline two"


@pytest.mark.process
def test_ps_and_kill_while_the_agent_works(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(
        tool_call_reply([("call_srv", "bash", {"command": "echo serving; exec sleep 1000",
                                                "background": True})]),
        text_reply("Started.", gate=gate), text_reply("Noted: it was stopped."))
    terminal = terminal_factory(fake_openai, "--permission-mode", "auto")
    terminal.idle()
    terminal.type("start the server\n")
    fake_openai.wait_for_requests(2, timeout=DEADLINE)  # the run goes on: the reply is held
    terminal.type("/ps\n")
    terminal.expect("1  running")
    terminal.expect("echo serving; exec sleep 1000")
    terminal.type("/kill 1\n")
    terminal.expect("● background process 1 was killed (signal SIGTERM)")
    terminal.expect("process 1 killed (SIGTERM)")
    gate.set()
    terminal.expect("Noted: it was stopped.")
    terminal.idle()
    terminal.type("/kill 1\n")
    terminal.expect("process 1 had ended: killed (SIGTERM)")
    terminal.type("/kill 7\n")
    terminal.expect("no background process 7")
    terminal.idle()
    terminal.type("/quit\n")

    assert terminal.wait() == 0
    assert fake_openai.requests[2]["messages"][-1]["content"] == (
        "[Background process 1 `echo serving; exec sleep 1000` was killed by the user; last "
        "lines:\nserving]")
    assert len(fake_openai.requests) == 3  # the commands were not messages


@pytest.mark.process
def test_double_angle_queues_a_follow_up(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("First answer.", gate=gate), text_reply("Second answer."))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("one\n")
    fake_openai.wait_for_requests(1, timeout=DEADLINE)
    terminal.type(">> and two\n")
    terminal.expect("↪ follow-up queued")
    gate.set()
    terminal.expect("First answer.")
    terminal.expect("Second answer.")
    terminal.idle()
    terminal.type("/quit\n")

    assert terminal.wait() == 0
    assert roles(fake_openai.requests[1]) == ["system", "user", "assistant", "user"]
    assert fake_openai.requests[1]["messages"][3]["content"] == "and two"


@pytest.mark.process
def test_mcp_server_status_is_shown_at_start(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f"[mcp_servers.time]\ncommand = {json.dumps(sys.executable)}\n"
        'args = ["-m", "mcp_server_time"]\n'
        "[mcp_servers.gone]\ncommand = \"/nonexistent/mcp-server\"\n"
    )
    terminal = terminal_factory(fake_openai, "--config", str(config))
    terminal.idle()
    screen = terminal.output
    terminal.type("/quit\n")

    assert terminal.wait() == 0
    assert "MCP server time: ready, 2 tools" in screen
    assert "MCP server gone failed: " in screen and "/nonexistent/mcp-server" in screen


@pytest.mark.process
def test_ctrl_c_aborts_the_run_then_quits_at_the_prompt(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    gate = threading.Event()
    fake_openai.enqueue(text_reply("never shown", gate=gate), text_reply("Still here."))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("hang\n")
    fake_openai.wait_for_requests(1, timeout=DEADLINE)
    terminal.type("\x03")  # Ctrl-C: the terminal signals chat, not its server
    terminal.expect("✗ aborted")
    terminal.idle()
    terminal.type("again\n")  # the server survived and the session is still usable
    terminal.expect("Still here.")
    terminal.idle()
    terminal.type("half typed")
    terminal.expect_screen(lambda lines: "> half typed" in lines, "the line typed")
    terminal.type("\x03")  # at the prompt: the line is cleared, and how to quit is said
    said = ("(Ctrl-C again, Ctrl-D or /quit to quit; `tiller chat --resume` picks this "
            "session up again)")
    lines = terminal.expect_screen(
        lambda lines: said in lines and [line for line in lines if line][-1] == ">",
        "how to quit, above an empty input line")
    assert "> half typed" not in lines
    assert terminal.process.poll() is None  # still there
    terminal.type("\x03")  # a second in a row: quit

    assert terminal.wait() == 0
    assert "never shown" not in terminal.output
    assert "Traceback" not in terminal.output


@pytest.mark.process
def test_the_embedded_model_starts_with_an_honest_line(
    tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    """No key, no URL: the chat says first that the embedded model cannot use tools (the model
    is not loaded for that), and the status line names it as --json does."""
    terminal = Terminal(chat_argv(None, tmp_path), tmp_path)
    try:
        terminal.expect(f"ⓘ {CHAT_ONLY_NOTICE}")
        terminal.expect("local/smollm2 · ask · session ")
        terminal.idle()
        terminal.type("/thinking high\n")  # accepted, but not silently: it has no effect
        terminal.expect("thinking: high")
        terminal.expect("ℹ smollm2 does not think: thinking level high has no effect on it")
        terminal.idle()
        terminal.type("hello\n")  # the real SmolLM2, on the CPU: a short answer, in seconds
        terminal.expect("↳ ")  # the run's usage line: the reply is complete
        terminal.idle()
        terminal.type("\x04")
        assert terminal.wait() == 0
        assert terminal.output.count("smollm2 does not think") == 1  # not again at the run
    finally:
        terminal.close()


@pytest.mark.process
def test_the_embedded_model_is_named_in_json_as_in_the_status_line(tmp_path: Path) -> None:
    """``tiller run --json`` with no key: the messages name the model ``smollm2``, as the
    chat's status line (``local/smollm2``) and agent/getState do, not the GGUF's file name."""
    done = subprocess.run(run_argv(None, tmp_path, "hello", "--json"), env=clean_env(),
                          cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=DEADLINE)

    *events, result = [json.loads(line) for line in done.stdout.splitlines()]
    assert result["type"] == "result" and result["stopReason"] in ("stop", "length"), done.stderr
    replies = [event["message"] for event in events if event["type"] == "message_end"
               and event["message"]["role"] == "assistant"]
    assert replies and {(r["provider"], r["model"]) for r in replies} == {("local", "smollm2")}


@pytest.mark.process
def test_an_unknown_slash_command_is_reported_not_sent(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    prompts = tmp_path / ".tiller" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "review.md").write_text("Review $1.\n")
    fake_openai.enqueue(text_reply("Fresh one ran."), text_reply("It is in /usr/bin."))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("/reviw app.py\n")
    terminal.expect("✗ unknown command /reviw; did you mean /review? (not sent; /help lists "
                    "the commands)")
    terminal.idle()
    terminal.type("/hepl\n")
    terminal.expect("✗ unknown command /hepl; did you mean /help?")
    terminal.idle()
    (prompts / "fresh.md").write_text("A fresh template.\n")  # added while the chat runs
    terminal.type("/fresh\n")
    terminal.expect("Fresh one ran.")
    terminal.idle()
    terminal.type("/usr/bin/env is where?\n")  # a path, not a command: sent as typed
    terminal.expect("It is in /usr/bin.")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    sent = [request["messages"][-1]["content"] for request in fake_openai.requests]
    assert sent == ["A fresh template.\n", "/usr/bin/env is where?"]


@pytest.mark.process
def test_the_status_line_is_drawn_not_printed_and_new_resets_it(
    tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    """The status line stays above the prompt, never repeated into the transcript (runs and
    slash commands alike); after /new it is the new session's: no tokens, no context use."""
    with FakeOpenAI(models=("gpt-6.1-terra",)) as fake:
        fake.enqueue(text_reply("Big context.", usage=(120_000, 5)))
        terminal = terminal_factory(fake)
        terminal.idle()
        terminal.type("hi\n")
        terminal.expect("Big context.")
        terminal.expect("context 11% of 1,050,000")
        terminal.idle()
        terminal.type("/compact\n")  # one user message: nothing older to summarize
        terminal.expect("⟳ nothing to compact: the conversation has no older part to summarize")
        terminal.idle()
        terminal.type("/mode\n")
        terminal.expect("permission mode: ask")
        terminal.idle()
        terminal.type("/new\n")
        terminal.expect("new session ")
        lines = terminal.expect_screen(
            lambda lines: any("· 0 tokens · $0.0000" in line for line in lines),
            "the new session's status line")
        [status] = [line for line in lines if " tokens · $" in line]
        assert "context" not in status
        terminal.type("\x04")
        assert terminal.wait() == 0
    everything = terminal.shown().splitlines()
    assert [line for line in everything if " tokens · $" in line] == []  # drawn, then gone
    assert "compaction failed" not in terminal.output
    fake.assert_script_complete()


@pytest.mark.process
def test_markdown_streams_as_it_comes_and_is_rendered_when_the_block_ends(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """On a colour terminal a list shows line by line while it streams (it used to show only
    the spinner until it was complete), then is replaced by its rendering."""
    until = threading.Event()
    fake_openai.enqueue(paused_reply("Steps:\n\n- first step\n- second st", "ep\n\nAll done.",
                                     until=until))
    terminal = Terminal(chat_argv(fake_openai, tmp_path), tmp_path, color=True)
    try:
        terminal.idle()
        terminal.type("plan it\n")
        terminal.expect_screen(
            lambda lines: "- first step" in lines and "- second st" in lines,
            "the unfinished list, raw, while the reply streams")
        until.set()
        lines = terminal.expect_screen(
            lambda lines: "All done." in lines and " • second step" in lines,
            "the list rendered")
        assert " • first step" in lines and "Steps:" in lines
        assert not [line for line in lines if line.startswith("- ")]  # replaced, not repeated
        terminal.idle()
        terminal.type("\x04")
        assert terminal.wait() == 0
    finally:
        terminal.close()


# ---------------------------------------------------------------------------------------------
# Permission questions, on a pseudo-terminal


def write_call(path: str, content: str) -> Reply:
    return tool_call_reply([("call_w", "write", {"path": path, "content": content})])


def tool_messages(fake: FakeOpenAI, request_index: int) -> list[str]:
    return [m["content"] for m in fake.requests[request_index]["messages"] if m["role"] == "tool"]


@pytest.mark.process
def test_yes_at_the_question_lets_the_write_run(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    (tmp_path / "notes.txt").write_text("old line\n")
    fake_openai.enqueue(write_call("notes.txt", "new line\n"), text_reply("Written."))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("edit the notes\n")
    terminal.expect("⚙ write")  # the events before the question are shown before it
    terminal.expect(f"? 'write' changes {(tmp_path / 'notes.txt').resolve()}")
    terminal.expect("  -old line")
    terminal.expect("  +new line")
    terminal.expect(f"  always / never: write on {(tmp_path / 'notes.txt').resolve()}, for the "
                    "rest of this session")
    terminal.expect(ASK_PROMPT)
    assert (tmp_path / "notes.txt").read_text() == "old line\n"  # it waits for the answer
    terminal.type("y\n")
    terminal.expect("✓ write")
    terminal.expect("Written.")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    assert (tmp_path / "notes.txt").read_text() == "new line\n"
    assert "steering queued" not in terminal.output  # the answer was not a message


@pytest.mark.process
def test_the_start_line_says_once_that_commands_run_unsandboxed(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    fake_openai.enqueue(tool_call_reply([("call_b", "bash", {"command": "echo hi"})]),
                        text_reply("Ran it."))
    terminal = terminal_factory(fake_openai, TILLER_BWRAP=str(tmp_path / "no-bwrap"))
    terminal.expect("Commands run unsandboxed: bubblewrap (bwrap) is not installed")
    terminal.idle()
    terminal.type("go\n")
    terminal.expect("? 'bash' runs a command, unsandboxed (no sandbox here: bubblewrap")
    terminal.expect(ASK_PROMPT)
    terminal.type("y\n")
    terminal.expect("Ran it.")
    terminal.idle()
    terminal.type("/quit\n")

    assert terminal.wait() == 0
    assert terminal.output.count("is not installed: install it") == 3  # start line, reason, preview


@pytest.mark.process
def test_no_at_the_question_rejects_with_a_reason(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    fake_openai.enqueue(
        tool_call_reply([("call_b", "bash", {"command": "touch hacked"})]),
        text_reply("Left it alone."),
    )
    terminal = terminal_factory(fake_openai, *UNSANDBOXED)  # sandboxed, it is not asked
    terminal.idle()
    terminal.type("do it\n")
    terminal.expect("? 'bash' runs a command")
    terminal.expect("  $ touch hacked")
    terminal.expect(f"  in {tmp_path.resolve()}")
    terminal.expect("  unsandboxed: the sandbox is off")
    terminal.expect(ASK_PROMPT)
    terminal.type("maybe\n")  # not an answer: asked again
    terminal.expect("answer y (allow once)")
    terminal.expect(ASK_PROMPT)
    terminal.type("n\n")
    terminal.expect("reason (optional): ")
    terminal.type("not in my repo\n")
    terminal.expect("✗ bash")
    terminal.expect("Left it alone.")
    terminal.idle()
    terminal.type("/quit\n")

    assert terminal.wait() == 0
    assert not (tmp_path / "hacked").exists()
    [rejection] = tool_messages(fake_openai, 1)
    assert "the user rejected this call: not in my repo" in rejection


@pytest.mark.process
def test_ctrl_c_at_the_question_rejects_and_aborts(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    fake_openai.enqueue(write_call("new.txt", "data\n"))
    terminal = terminal_factory(fake_openai)
    terminal.idle()
    terminal.type("write it\n")
    terminal.expect(ASK_PROMPT)
    terminal.type("\x03")
    terminal.expect("✗ rejected; aborting")
    terminal.expect("✗ aborted")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    assert not (tmp_path / "new.txt").exists()
    assert len(fake_openai.requests) == 1


@pytest.mark.process
def test_a_question_the_server_stops_waiting_for_is_dropped(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    config = tmp_path / "tiller.toml"
    config.write_text("[permissions]\ntimeout = 1\n")  # passed through with --config
    fake_openai.enqueue(write_call("new.txt", "data\n"), text_reply("No answer, then."))
    terminal = terminal_factory(fake_openai, "--config", str(config))
    terminal.idle()
    terminal.type("write it\n")
    terminal.expect(ASK_PROMPT)
    terminal.expect("✗ the server stopped waiting for an answer")
    terminal.expect("No answer, then.")
    terminal.idle()
    fake_openai.enqueue(text_reply("A new run."))
    terminal.type("y\n")  # too late for the question: an ordinary prompt now
    terminal.expect("A new run.")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    assert not (tmp_path / "new.txt").exists()
    assert fake_openai.requests[2]["messages"][-1] == {"role": "user", "content": "y"}


@pytest.mark.process
def test_print_mode_never_asks(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(write_call("out.txt", "done\n"), text_reply("Wrote it."))
    done = run_chat(fake_openai, tmp_path, "-p", "write the file")

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.txt").read_text() == "done\n"  # auto: nobody to ask
    assert "Allow?" not in done.stdout + done.stderr


@pytest.mark.process
def test_print_mode_with_a_permission_mode_denies(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake_openai.enqueue(write_call("out.txt", "done\n"), text_reply("Could not."))
    done = run_chat(fake_openai, tmp_path, "-p", "write the file", "--permission-mode", "readonly")

    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out.txt").exists()
    assert "Allow?" not in done.stdout + done.stderr


# ---------------------------------------------------------------------------------------------
# Resuming, and the options passed to the server


@pytest.mark.process
def test_resume_shows_the_history_and_continues_it(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    fake_openai.enqueue(text_reply("First answer,\nover two lines."))
    assert run_chat(fake_openai, tmp_path, "-p", "remember the word kiwi").returncode == 0
    fake_openai.enqueue(text_reply("The word was kiwi."))
    terminal = terminal_factory(fake_openai, "--resume")
    terminal.expect("> remember the word kiwi")
    terminal.expect("First answer,")
    terminal.expect("over two lines.")
    terminal.expect("↻ resumed session")
    terminal.expect("2 messages")
    terminal.idle()
    terminal.type("which word?\n")
    terminal.expect("The word was kiwi.")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    assert roles(fake_openai.requests[1]) == ["system", "user", "assistant", "user"]


@pytest.mark.process
def test_resume_with_nothing_saved_fails(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    done = run_chat(fake_openai, tmp_path, "--resume", "-p", "hi")

    assert done.returncode == 1
    assert f"no saved session to resume in {tmp_path}" in done.stderr


def test_server_options_are_passed_through() -> None:
    options = build_parser().parse_args([
        "--config", "c.toml", "--thinking", "high", "--permission-mode", "acceptEdits",
        "--max-turns", "7", "--session-dir", "s", "--no-session", "--model", "m",
    ])

    assert server_args(options) == [
        "--model", "m", "--config", "c.toml", "--thinking", "high",
        "--permission-mode", "acceptEdits", "--max-turns", "7", "--session-dir", "s",
        "--no-session",
    ]


# ---------------------------------------------------------------------------------------------
# The renderer, in-process


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


THINKING = {"type": "message_update", "kind": "thinking", "index": 0, "delta": "hmm"}
TEXT = {"type": "message_update", "kind": "text", "index": 1, "delta": "Answer."}
REPLY_END = {"type": "message_end", "message": {"role": "assistant", "content": []}}


@pytest.mark.parametrize(
    ("stream", "env", "dimmed"),
    [(FakeTerminal, {}, True), (FakeTerminal, {"NO_COLOR": "1"}, False), (io.StringIO, {}, False)],
)
def test_thinking_is_dim_only_on_a_color_terminal(
    stream: type[io.StringIO], env: dict[str, str], dimmed: bool, terminal_size: None
) -> None:
    out = stream()
    renderer = Renderer(out, io.StringIO(), env)
    renderer.handle(THINKING)
    renderer.handle(TEXT)
    renderer.handle(REPLY_END)

    if not dimmed:
        assert out.getvalue() == "hmm\nAnswer.\n"
        return
    assert out.getvalue().startswith("\x1b[2mhmm\x1b[0m\n")
    assert screen_of(out.getvalue()) == ["hmm", "Answer."]  # the reply shown, then rendered


MARKDOWN = "# Plan\n\nSome *stress* here.\n\n- one\n- two\n\n```python\nx = 1\n\ny = 2\n```\n"


def screen_of(output: str, columns: int = 100, rows: int = 40) -> list[str]:
    """What a terminal shows after ``output`` (pyte), lines stripped, blank ones dropped."""
    screen = pyte.Screen(columns, rows)
    pyte.Stream(screen).feed(output.replace("\n", "\r\n"))  # the tty's onlcr
    return [line.rstrip() for line in screen.display if line.strip()]


@pytest.fixture
def terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "40")


@pytest.mark.parametrize(
    ("stream", "env"), [(FakeTerminal, {}), (FakeTerminal, {"NO_COLOR": "1"}), (io.StringIO, {})]
)
def test_a_reply_is_rendered_as_markdown_only_on_a_color_terminal(
    stream: type[io.StringIO], env: dict[str, str], terminal_size: None
) -> None:
    out = stream()
    renderer = Renderer(out, io.StringIO(), env)
    for start in range(0, len(MARKDOWN), 5):  # streamed in pieces that cut through the blocks
        renderer.handle({**TEXT, "delta": MARKDOWN[start:start + 5]})
    renderer.handle(REPLY_END)

    if stream is io.StringIO or env:
        assert out.getvalue() == MARKDOWN  # plain: the text as the model wrote it
        return
    shown = screen_of(out.getvalue())
    assert shown[0].strip() == "Plan" and "\x1b[1;4mPlan\x1b[0m" in out.getvalue()  # a heading
    assert "Some stress here." in shown and "Some \x1b[3mstress\x1b[0m here." in out.getvalue()
    assert " • one" in shown and " • two" in shown  # a list, rendered
    code = [line for line in shown if "x = " in line or "y = " in line]
    assert len(code) == 2
    assert not [line for line in shown if line.startswith(("#", "- ", "```"))]  # no raw left


def test_markdown_text_shows_as_it_arrives_and_is_rendered_when_its_block_ends(
    terminal_size: None,
) -> None:
    """A long list used to show nothing until it was complete: its lines show raw as they
    stream, and are replaced by their rendering once the block ends."""
    out = FakeTerminal()
    renderer = Renderer(out, io.StringIO(), {})
    renderer.handle({**TEXT, "delta": "- one\n- tw"})
    assert screen_of(out.getvalue()) == ["- one", "- tw"]  # the unfinished block, raw
    renderer.handle({**TEXT, "delta": "o\n\nDone"})
    assert screen_of(out.getvalue()) == [" • one", " • two", "Done"]  # rendered; "Done" raw
    renderer.handle(REPLY_END)
    assert screen_of(out.getvalue()) == [" • one", " • two", "Done"]


def test_a_block_too_tall_to_erase_stays_raw(terminal_size: None) -> None:
    out = FakeTerminal()
    renderer = Renderer(out, io.StringIO(), {})
    items = "".join(f"- item {n}\n" for n in range(60))  # taller than the 40-row screen
    for start in range(0, len(items), 7):
        renderer.handle({**TEXT, "delta": items[start:start + 7]})
    renderer.handle({**TEXT, "delta": "\nAfter *it*."})
    renderer.handle(REPLY_END)

    shown = screen_of(out.getvalue())
    assert shown[-1] == "After it." and shown[-2] == "- item 59"  # raw, then rendered
    assert "• item" not in out.getvalue()  # the tall block was never rendered over itself


def test_an_mcp_server_that_needs_a_sign_in_says_how() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(out, err, {})
    server = {"name": "linear", "transport": "http", "status": "needsAuth", "tools": []}
    renderer.handle({"type": "mcp_status", "server": server})
    renderer.handle({"type": "mcp_status", "server": {
        **server, "authUrl": "https://auth.example/authorize?x=1"}})

    assert out.getvalue() == ""  # notices go where errors do: the screen, not the answer
    assert err.getvalue().splitlines() == [
        "MCP server linear needs a sign-in: /login linear",
        "MCP server linear: open this URL to sign in: https://auth.example/authorize?x=1",
    ]


def test_a_failing_tool_and_the_usage_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = Renderer(out, err, {})
    renderer.handle({"type": "tool_execution_start", "toolName": "read", "args": {"path": "x"}})
    result = {"content": [{"type": "text", "text": "no such file: x"}]}
    renderer.handle({"type": "tool_execution_end", "toolName": "read", "isError": True,
                     "result": result})
    usage = {"inputTokens": 1200, "outputTokens": 34, "cacheReadTokens": 1000}
    renderer.handle({"type": "agent_end", "stopReason": "maxTurns", "usage": usage})

    assert out.getvalue() == "⚙ read: x\n✗ read\n  no such file: x\n"
    assert err.getvalue() == "✗ stopped at the turn limit\n↳ 1,200 in · 34 out · 1,000 cached\n"


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}])
def test_a_finished_edit_shows_its_diff_coloured(env: dict[str, str]) -> None:
    out = FakeTerminal()
    renderer = Renderer(out, io.StringIO(), env)
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"
    result = {"content": [{"type": "text", "text": "Edited x."}], "details": {"diff": diff}}
    renderer.handle({"type": "tool_execution_end", "toolName": "edit", "isError": False,
                     "result": result})

    lines = out.getvalue().splitlines()
    if env:
        assert lines == ["✓ edit", "  Edited x."]
        return
    assert lines[1:] == ["\x1b[1m  --- a/x\x1b[0m", "\x1b[1m  +++ b/x\x1b[0m",
                         "\x1b[36m  @@ -1 +1 @@\x1b[0m", "\x1b[31m  -old\x1b[0m",
                         "\x1b[32m  +new\x1b[0m"]


def test_a_permission_question_colours_its_diff() -> None:
    out = FakeTerminal()
    renderer = Renderer(out, io.StringIO(), {})
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"
    renderer.permission({"reason": "'write' changes x", "toolName": "write",
                         "preview": {"kind": "diff", "path": "x", "diff": diff}})

    lines = out.getvalue().splitlines()
    assert lines[0] == "\x1b[1;33m? 'write' changes x\x1b[0m"
    assert lines[4:6] == ["  \x1b[31m-old\x1b[0m", "  \x1b[32m+new\x1b[0m"]
    assert lines[6] == "\x1b[2m  always / never: write on x, for the rest of this session\x1b[0m"


def test_the_question_says_what_always_and_never_cover_for_a_command() -> None:
    out = io.StringIO()
    Renderer(out, io.StringIO(), {}).permission({
        "reason": "bash runs a command", "toolName": "bash",
        "preview": {"kind": "command", "command": "git status", "cwd": "/w"},
    })

    assert out.getvalue().splitlines()[-1].startswith(
        "  always / never: this exact command (each simple command in it, word for word;"
    )


@pytest.mark.process
def test_changes_and_undo_with_a_confirmation(
    fake_openai: FakeOpenAI, tmp_path: Path, terminal_factory: Callable[..., Terminal]
) -> None:
    (tmp_path / "notes.txt").write_text("old line\n")
    fake_openai.enqueue(write_call("notes.txt", "new line\n"), text_reply("Written."))
    terminal = terminal_factory(fake_openai, "--permission-mode", "auto")
    terminal.idle()
    terminal.type("edit the notes\n")
    terminal.expect("Written.")
    terminal.idle()
    terminal.type("/changes\n")
    terminal.expect("modified notes.txt (+1 -1)")
    terminal.idle()
    terminal.type("/undo\n")
    terminal.expect("modified notes.txt (+1 -1)")
    terminal.expect(CONFIRM_UNDO)
    terminal.type("n\n")
    terminal.expect("kept the changes")
    assert (tmp_path / "notes.txt").read_text() == "new line\n"
    terminal.idle()
    terminal.type("/undo\n")
    terminal.expect(CONFIRM_UNDO)
    terminal.type("y\n")
    terminal.expect("↺ restored notes.txt")
    terminal.idle()
    terminal.type("\x04")

    assert terminal.wait() == 0
    assert (tmp_path / "notes.txt").read_text() == "old line\n"
    assert len(fake_openai.requests) == 2  # the commands and answers were not messages


def test_a_tool_call_is_one_readable_line() -> None:
    from tiller.chat.status import tool_line

    assert tool_line("bash", {"command": "git status\ngit diff"}) == "bash: git status …"
    assert tool_line("grep", {"pattern": "TODO", "path": "src"}) == "grep: TODO in src"
    assert tool_line("find", {"pattern": "*.py"}) == "find: *.py in ."
    assert tool_line("edit", {"path": "a.py", "edits": [{}, {}]}) == "edit: a.py (2 edits)"
    assert tool_line("write", {"path": "a.py", "content": "x\ny\n"}) == "write: a.py (2 lines)"
    assert tool_line("read", {"path": "a.py", "offset": 40, "limit": 10}) == (
        "read: a.py (from line 40, 10 lines)")
    assert tool_line("ls", {}) == "ls"
    assert tool_line("mcp__t__now", {"zone": "UTC", "n": 2}) == 'mcp__t__now: zone="UTC", n=2'


def test_a_hook_that_blocks_fails_or_says_something_is_one_line() -> None:
    from tiller.chat.status import Status

    hook = {"type": "hook_end", "hookId": "hook-1", "hookEvent": "PreToolUse",
            "command": "no-rm.sh", "source": "config.toml"}
    assert Status.notice({**hook, "outcome": "ok"}) is None
    assert Status.notice({**hook, "outcome": "blocked", "message": "use trash"}) == (
        "⚠ PreToolUse hook blocked (no-rm.sh): use trash")
    assert Status.notice({**hook, "outcome": "timeout", "message": "timed out"}) == (
        "⚠ PreToolUse hook timed out (no-rm.sh): timed out")
    assert Status.notice({**hook, "outcome": "ok", "message": "formatted"}) == (
        "↪ PreToolUse hook ran (no-rm.sh): formatted")


def test_a_subagents_calls_are_indented_lines_and_its_words_are_not_the_reply(
    terminal_size: None
) -> None:
    out = io.StringIO()
    renderer = Renderer(out, io.StringIO(), {})
    link = {"sessionId": "c", "parentSessionId": "s", "parentToolCallId": "t1"}
    renderer.handle({**link, "type": "agent_start"})
    renderer.handle({**link, **TEXT})
    renderer.handle({**link, "type": "tool_execution_start", "toolCallId": "g", "toolName": "grep",
                     "args": {"pattern": "x"}})
    renderer.handle({**link, "type": "tool_execution_end", "toolCallId": "g", "toolName": "grep",
                     "isError": True, "result": {"content": []}})
    renderer.handle({**link, "type": "agent_settled"})

    assert out.getvalue() == "  ↳ ⚙ grep: x in .\n  ↳ ✗ grep\n"
