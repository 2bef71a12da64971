"""``tiller chat`` on a pseudo-terminal: ``/`` + Tab completes the session's slash commands
(Tab twice lists them), and a completed command runs as its template. Plus the completer's
matching rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fake_openai import FakeOpenAI, text_reply
from support.terminal import Terminal, chat_argv
from tiller.chat.complete import CommandNames


@pytest.mark.process
def test_slash_tab_completes_and_lists_commands(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    prompts = tmp_path / ".tiller" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "fixup.md").write_text("Fix issue $1 quickly.\n")
    (prompts / "fiddle.md").write_text("Fiddle.\n")
    (prompts / "review.md").write_text("Review $ARGUMENTS.\n")
    fake_openai.enqueue(text_reply("Fixed."))
    terminal = Terminal(chat_argv(fake_openai, tmp_path, "--permission-mode", "auto"), tmp_path)
    try:
        terminal.expect("> ")
        terminal.type("/fi\t\t")  # two matches: the second Tab lists them
        terminal.expect("/fiddle")
        terminal.expect("/fixup")
        terminal.type("x\t42\n")  # /fix + x -> the one match, completed with a space
        terminal.expect("Fixed.")
        terminal.expect("> ")
        terminal.type("\x04")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    [request] = fake_openai.requests
    assert request["messages"][-1] == {"role": "user", "content": "Fix issue 42 quickly.\n"}


def test_only_a_leading_slash_word_completes() -> None:
    names = CommandNames()
    names.set_from([{"name": "review"}, {"name": "skill:deploy"}, {"name": "release"}])
    assert names.matches("/re", "/re") == ["/release", "/review"]
    assert names.matches("/sk", "/sk") == ["/skill:deploy"]
    assert names.matches("say /re", "/re") == []
    assert names.matches("re", "re") == []
    names.observe({"type": "commands_changed", "commands": [{"name": "ship"}]})
    names.observe({"type": "agent_start"})
    assert names.matches("/", "/") == ["/ship"]


@pytest.mark.process
def test_the_chats_own_slash_commands(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.enqueue(text_reply("First."), text_reply("Second."))
    # o4-mini: the catalog's reasoning model (others get no reasoning_effort)
    terminal = Terminal(chat_argv(fake_openai, tmp_path, "--model", "o4-mini"), tmp_path)

    def prompt() -> None:
        terminal.expect(" tokens · $")  # the status line, then the prompt
        terminal.expect("> ")

    try:
        terminal.expect("· ask · session ")
        prompt()
        terminal.type("/help\n")
        terminal.expect("/compact")
        terminal.expect("/continue")
        prompt()
        terminal.type("/mode auto\n")
        terminal.expect("permission mode: auto")
        terminal.expect("· auto · session ")  # the status line follows
        prompt()
        terminal.type("/thi\thigh\n")  # the chat's own commands complete too
        terminal.expect("thinking: high")
        prompt()
        terminal.type("/thinking extreme\n")
        terminal.expect("✗ Invalid params")
        prompt()
        terminal.type("one\n")
        terminal.expect("First.")
        prompt()
        terminal.type("/new\n")
        terminal.expect("new session ")
        prompt()
        terminal.type("/sessions\n")
        terminal.expect("messages")
        prompt()
        terminal.type("two\n")
        terminal.expect("Second.")
        prompt()
        terminal.type("\x04")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    first, second = fake_openai.requests
    assert second["messages"][1:] == [{"role": "user", "content": "two"}]  # a new session
    assert first["messages"][-1] == {"role": "user", "content": "one"}
    assert first["reasoning_effort"] == "high"  # /thinking applied to the run


@pytest.mark.process
def test_thinking_says_when_the_model_runs_another_level(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    """/thinking on a model that does not think says so (it was accepted silently), and one
    that lacks the level names the level it runs at; the levels run up to max."""
    config = tmp_path / "config.toml"
    config.write_text(
        '[[models]]\nprovider = "openai"\nid = "plain"\nreasoning = false\n'
        '[[models]]\nprovider = "openai"\nid = "stepped"\nthinking_levels = ["low", "high"]\n')
    fake_openai.enqueue(text_reply("Thought."))
    argv = chat_argv(fake_openai, tmp_path, "--model", "plain", "--config", str(config))
    terminal = Terminal(argv, tmp_path)

    def prompt() -> None:
        terminal.expect(" tokens · $")
        terminal.expect("> ")

    try:
        prompt()
        terminal.type("/thinking max\n")
        terminal.expect("thinking: max")
        terminal.expect("plain does not think: thinking level max has no effect on it")
        prompt()
        terminal.type("/model stepped\n")
        terminal.expect("model: openai/stepped")
        prompt()
        terminal.type("/thinking\n")
        terminal.expect("thinking: max, the model runs at high (one of off, low, medium, high, "
                        "xhigh, max)")
        prompt()
        terminal.type("go\n")
        terminal.expect("Thought.")
        prompt()
        terminal.type("\x04")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    [request] = fake_openai.requests
    assert request["model"] == "stepped"
