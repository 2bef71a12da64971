"""``tiller chat`` and ``tiller run``: the terminal client over a ``tiller`` server process it
spawns: the command line (``cli``), the conversation (``app``), what it shows (``render``,
``markdown``, ``status``), its input (``input``, ``complete``), its own slash commands
(``slash``, ``checkpoints``) and the server connection (``connection``).
"""
