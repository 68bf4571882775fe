"""Live per-token plots: ring buffers filled per token, repainted by a timer at <= 30 Hz."""
