"""The settings panel, generated from the config tree (workbench/config.py), and presets."""
