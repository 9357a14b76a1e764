from shardcheck.cli import entry

entry()
