"""Recorded runs as the runs list, the compare view and `workbench runs` see them: stored runs
and imported metrics files as one kind of entry, and a stored run written back as a metrics file
(Qt-free; it reads the store and the bench's figures, so it sits above both).
"""
