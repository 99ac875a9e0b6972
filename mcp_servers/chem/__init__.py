"""Chemical procurement pricing: a frozen catalogue, supplier quotes, reactions to price, and the tools.

See docs/chem.md. Nothing heavy is imported here; ``registration.py`` registers the server,
the data builder and the task suites by string target.
"""
