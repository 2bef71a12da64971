"""Problems the agent's edits introduce: the editor's diagnostics (``client/getDiagnostics``) or a
configured command's (``[diagnostics]``), before and after a file-changing tool call, compared,
and the new ones appended to the call's result."""
