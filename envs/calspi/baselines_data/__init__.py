"""The frozen Cal-SPI baselines, one ``<Domain>.json`` each, shipped inside the package (read with
``importlib.resources``); ``python -m gauntlet.envs.calspi.baselines --domain X`` rewrites them."""
