"""gauntlet.envs: Gymnasium environments, one sub-package per family.

Each family is a sub-package with a light ``registration.py`` whose ``register()`` adds its entries
(string entry points only); ``register()`` below finds them all.
"""

if __name__ != "gauntlet.envs":  # the folder is mounted by the build; a bare import would shadow other packages
    raise ImportError("import gauntlet.envs, not the bare 'envs' folder (install the project: make test)")


def register() -> None:
    """Register every family of this package with the Gauntlet registries (called on `import gauntlet`)."""
    from gauntlet.registry import register_subpackages

    register_subpackages(__name__, __path__[0])
