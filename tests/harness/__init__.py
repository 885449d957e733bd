"""The test suite's own harness: real loop-mounted volumes, holder processes, containers."""
