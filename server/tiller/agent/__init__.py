"""The agent core: the two-level loop of docs/loop.md (``loop``), the thin stateful
``Agent`` that owns the queues and the abort (``agent``), its settings and abort switch, the
model call and what wraps it (``model_call``, ``retry``, ``compaction``, ``pricing``), and one
assistant message's tool calls run as a batch (``tool_batch``).
"""
