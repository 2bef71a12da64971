"""Tiller: a JSON-RPC agent backend that editors spawn over stdio."""

from __future__ import annotations

__version__ = "0.1.0"
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "__version__"]
