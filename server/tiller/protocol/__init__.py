"""Tiller's wire protocol, mirroring protocol.md one to one: the names of its methods, events
and server requests (``names``, free of pydantic for ``initialize``), each method's params and
result models (``methods``, the table everything else reads), the models themselves (``models``,
``client_requests``, ``checkpoints``), and ``tiller schema``'s JSON Schema built from the table
(``schema``).
"""
