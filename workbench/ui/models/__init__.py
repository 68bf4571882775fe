"""Choosing a model: embedded defaults, recent files, metadata and a memory estimate."""
