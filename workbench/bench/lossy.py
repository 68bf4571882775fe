"""The lossy levers: the settings panel's "Speed / quality" group. Quality scoring resets them
for its lossless reference, the compare view marks them in the configuration difference, and the
panel shows each one's measured cost. A setting added to the group is all of that at once."""

from __future__ import annotations

from workbench.config import SETTINGS, Config

LOSSY_GROUP = "Speed / quality"
LOSSY_NAMES: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.group == LOSSY_GROUP)
# Settings whose effect depends on what the expert cache holds when a token is read (dropping
# pays for a miss or not, substitution prefers what is resident): only one-token-per-decode
# scoring measures them as generation meets them.
CACHE_DEPENDENT = ("drop_cold_frac", "expert_substitute")


def lossy_settings(config: Config) -> dict[str, object]:
    """The lossy levers set away from their lossless default."""
    return {s.name: getattr(config, s.name) for s in SETTINGS
            if s.group == LOSSY_GROUP and getattr(config, s.name) != s.default}
