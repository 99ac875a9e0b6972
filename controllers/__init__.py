"""gauntlet.controllers: oversight controllers and monitors."""

if __name__ != "gauntlet.controllers":  # the folder is mounted by the build; a bare import would shadow other packages
    raise ImportError("import gauntlet.controllers, not the bare 'controllers' folder (install the project: make test)")


def register() -> None:
    """Register this family's entries with the Gauntlet registries (called on `import gauntlet`)."""
