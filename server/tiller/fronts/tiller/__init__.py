"""Tiller's own front: protocol.md's methods served on ``tiller.wire.jsonrpc.Front``
(``front``), the handlers of every method after ``initialize`` (``handlers``), and a session's
events as ``agent/event`` notifications (``events``).
"""
