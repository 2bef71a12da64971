"""Tiller's wire protocol as models, mirroring protocol.md section by section: the methods'
params and results (``models``), the server-to-client requests (``client_requests``), the
checkpoint methods (``checkpoints``), and ``tiller schema``'s JSON Schema built from them
(``schema``).
"""
