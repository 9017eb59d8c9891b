"""Keeping the store and its caches right: background embedding workers, erasure (hard forget,
compaction), model migration."""
