"""shardcheck."""
