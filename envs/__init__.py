"""gauntlet.envs: Gymnasium environments, one sub-package per family."""

if __name__ != "gauntlet.envs":  # the folder is mounted by the build; a bare import would shadow other packages
    raise ImportError("import gauntlet.envs, not the bare 'envs' folder (install the project: make test)")


def register() -> None:
    """Register this family's entries with the Gauntlet registries (called on `import gauntlet`)."""
