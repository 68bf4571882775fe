"""Speculative decoding: draft tokens cheaply, verify them in one batch, keep what the model
itself would have picked. `ngram` drafts from the context (prompt lookup), `drafters` holds the
two draft sources, `policy` decides how much to draft, `verify` is one verify step's arithmetic.
"""
