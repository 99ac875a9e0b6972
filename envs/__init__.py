"""gauntlet.envs: Gymnasium environments, one sub-package per family.

Each family is a sub-package with a light ``registration.py`` whose ``register()`` adds its entries
(string entry points only); ``register`` below finds them all.
"""

from gauntlet.registry import families_registrar, require_mounted

require_mounted(__name__, "gauntlet.envs")
register = families_registrar(__name__, __path__[0])
