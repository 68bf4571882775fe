"""The window: PySide6 + pyqtgraph on a qasync loop, over the engine bridge and the store."""
