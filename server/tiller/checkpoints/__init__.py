"""Checkpoints: snapshots of the workspace in a shadow git repository (``shadow``), what the
agent changed in each turn and putting it back (``checkpoints``).
"""
