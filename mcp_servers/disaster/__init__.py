"""gauntlet.mcp_servers.disaster: disaster-response geospatial MCP server (DORA-style tool world).

Synthetic multi-sensor scenes at the real locations of real past events, a library of geospatial
tools (rasterio, shapely, networkx, scikit-image) served over MCP, and task suites with gold
trajectories. This module stays light: the heavy libraries load only when a tool or builder runs.
"""
