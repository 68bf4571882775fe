"""The conversation list: new, search, rename, delete with undo, export and import."""
