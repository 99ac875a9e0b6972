"""Bridges between the two worlds: any registered env served as an MCP server, and any MCP task
driven as a Gymnasium env."""
