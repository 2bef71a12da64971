"""The ACP schema check of tests/support/acp_schema.py catches what it is there to catch: a message
that does not conform to its method's definition, a result of the wrong shape for the request
it answers, and a method no agent sends."""

from __future__ import annotations

from support.acp_schema import AGENT_REQUESTS, RESPONSES, AcpWireCheck


def test_the_schema_names_the_methods_tiller_serves_and_sends() -> None:
    assert {"session/new", "session/list", "session/resume", "session/close",
            "session/set_config_option", "authenticate"} <= set(RESPONSES)
    assert {"terminal/create", "terminal/output", "session/request_permission"} <= set(
        AGENT_REQUESTS)


def test_conforming_messages_pass_and_the_others_are_named() -> None:
    wire = AcpWireCheck()
    wire.client_sent({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                      "params": {"cwd": "/w", "mcpServers": []}})
    wire.agent_sent({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}})
    wire.agent_sent({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s1", "update": {"sessionUpdate": "plan", "entries": [
            {"content": "read", "status": "pending", "priority": "medium"}]}}})
    assert wire.problems == [] and wire.checked == ["result:session/new", "session/update"]

    wire.client_sent({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                      "params": {"cwd": "/w", "mcpServers": []}})
    wire.agent_sent({"jsonrpc": "2.0", "id": 2, "result": {"session": "s1"}})  # no sessionId
    wire.agent_sent({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s1", "update": {"sessionUpdate": "plan", "entries": [
            {"content": "read", "status": "started", "priority": "medium"}]}}})
    wire.agent_sent({"jsonrpc": "2.0", "method": "agent/event", "params": {}})
    wire.agent_sent({"jsonrpc": "2.0", "id": 99, "result": {}})
    assert len(wire.problems) == 4
    assert "sessionId" in wire.problems[0]
    assert "agent/event is not something an agent sends" in wire.problems[2]
    assert "no request of the client" in wire.problems[3]
