"""Tool calls: the tools a request declares, how each model family writes a call, the grammar
that holds a call to its tool's schema, and the parser that reads calls back out of an answer."""
