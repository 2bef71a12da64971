"""The Agent Client Protocol front (v1, NDJSON on stdio) over Tiller's one session core.

``server`` serves ACP's methods; ``updates`` maps Tiller's events and transcript to ACP
``session/update`` payloads; ``editor`` turns Tiller's ``client/*`` requests into ACP's;
``diff`` rebuilds ACP's two-text diffs from Tiller's unified diffs. protocol.md's "ACP"
section is the contract.
"""
