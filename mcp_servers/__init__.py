"""gauntlet.mcp_servers: MCP tool servers, one sub-package per domain."""

if __name__ != "gauntlet.mcp_servers":  # the folder is mounted by the build; a bare import would shadow other packages
    raise ImportError("import gauntlet.mcp_servers, not the bare 'mcp_servers' folder (install the project: make test)")


def register() -> None:
    """Register this family's entries with the Gauntlet registries (called on `import gauntlet`)."""
