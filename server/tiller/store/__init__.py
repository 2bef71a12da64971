"""Sessions on disk: the append-only JSONL log (``log``), finding and opening saved sessions
(``saved``), the recorder that writes a session's events to its log (``recorder``), and the
replay that turns a saved log's outline back into models (``replay``), and the private modes
of everything written there (``private``).
"""
