"""The koord version, from the installed distribution's metadata. Imports: standard library only."""

from __future__ import annotations

from importlib import metadata


def koord_version() -> str:
    try:
        return metadata.version("koord")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0+unknown"
