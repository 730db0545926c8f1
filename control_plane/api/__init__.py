"""The HTTP edge (FastAPI)."""

from control_plane.api.app import create_app

__all__ = ["create_app"]
