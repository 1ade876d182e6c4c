"""koord: the umbrella package of the `koord` CLI and the local cluster used by tests and `koord up`.

May import every other koord package (it is the composition layer), never the other way round.
"""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("koord")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
