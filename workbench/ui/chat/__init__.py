"""The chat pane: message widgets, reasoning blocks, Markdown with code blocks, the composer."""
