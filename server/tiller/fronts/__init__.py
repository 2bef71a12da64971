"""The fronts that serve a client on stdio over the one session core: Tiller's own protocol
(``fronts.tiller``, protocol.md) and the Agent Client Protocol (``fronts.acp``).
"""
