"""koord: the umbrella package of the `koord` CLI and the local cluster used by tests and `koord up`.

May import every other koord package (it is the composition layer), never the other way round.
"""

from __future__ import annotations

from apis.version import koord_version

__version__ = koord_version()
