"""The commands of the ``gauntlet`` CLI, grouped by what they work on; ``gauntlet.cli`` mounts them."""
