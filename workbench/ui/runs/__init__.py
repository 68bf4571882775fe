"""Runs: the list of recorded and imported runs, the compare and correlate views, the bench
matrix launcher."""
