"""The OpenAPI schema of the API, generated from the app (``python -m control_plane.api.openapi``).

Building the app opens no connection: the engine client only connects when a request runs.
"""

from __future__ import annotations

import json
from typing import Any

from control_plane.api.app import create_app
from control_plane.bootstrap import profile_of
from control_plane.config import Settings
from control_plane.engine.opensearch import OpenSearchEngine
from control_plane.service import SearchService
from control_plane.times import system_clock


def openapi_schema() -> dict[str, Any]:
    settings = Settings()
    service = SearchService(settings, OpenSearchEngine(settings.engine.url, 1.0), profile_of(settings))
    try:
        schema: dict[str, Any] = json.loads(json.dumps(create_app(service, clock=system_clock).openapi()))
        return schema
    finally:
        service.close()


if __name__ == "__main__":
    print(json.dumps(openapi_schema(), indent=2, sort_keys=True))
