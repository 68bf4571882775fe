"""The command line: `main.py` builds the parser, one module per family of subcommands.

The top layer: it composes the window (ui/), the benches, the store and the engine, and nothing
below imports it.
"""
