"""The store: the only source of truth.

The protocol lives in ``mempager.protocols``; ``duckdb`` is the embedded default, ``pg`` the server store.
"""
