"""What the tests share: loopback fakes of the model APIs (``fake_openai``, ``fake_anthropic``
on ``loopback``), the strict scripted provider (``scripted``), spawning a real server
(``helpers``), the ACP client (``acp_client``), MCP servers (``mcp_servers``, ``mcp/``), a
pseudo-terminal for ``tiller chat`` (``terminal``), the schema checks (``schema_check``,
``acp_schema``) and the repository's paths (``paths``)."""
