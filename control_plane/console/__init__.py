"""The merchandiser's web console at ``/console`` (docs/console.md, ADR 0019): pages over
the workflow, the service and the audit, signed in with an API key, served by the API's own
process. Its scripts (htmx, CodeMirror 5) are vendored under ``static/``; nothing is loaded
from anywhere else."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from control_plane.console import authoring, pages, review
from control_plane.console.rendering import page
from control_plane.console.session import ConsoleError, SignInNeeded

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI) -> None:
    """Add the console's routes, its static files and the pages its refusals render."""
    for module in (pages, authoring, review):
        app.include_router(module.router)
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")

    @app.exception_handler(ConsoleError)
    async def _refused(request: Request, error: ConsoleError) -> Response:
        return page(request, "error.html.j2", status=error.status, error=error)

    @app.exception_handler(SignInNeeded)
    async def _sign_in(request: Request, error: SignInNeeded) -> Response:
        return RedirectResponse("/console/sign-in" + ("?note=expired" if error.message else ""), 303)
