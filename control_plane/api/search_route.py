"""The route of ``POST /v1/search``: a well-formed request straight to its handler (ADR 0033).

FastAPI's request handler does, for every request, what a search that is valid JSON of the
right shape does not need: it looks up its endpoint's context for error messages, parses
the content type with ``email.message``, solves the dependency tree (the search guard, the
body, the ``Request``) through its generic machinery and builds the handler's keyword
arguments. On this route that was about a fifth of the event loop's Python per warm search.

:class:`SearchRoute` is an :class:`~fastapi.routing.APIRoute` (the same path, models,
dependencies, OpenAPI operation) whose handler takes a **shortcut** for a request that is
plainly well-formed, and hands every other request to FastAPI's own handler unchanged:

- the shortcut: ``Content-Type: application/json`` (exactly, any case), a non-empty body that
  ``json.loads`` (what FastAPI uses) reads as an object, and that the body model validates
  as FastAPI validates it (``model_validate``, Python mode); then the route's dependencies
  (the search guard: plain ``async def f(request)`` functions) are awaited in their order
  and the endpoint is called with the model and the request. What it returns is what
  FastAPI would have sent: the endpoint answers a ``Response`` it built itself.
- everything else (another or no content type, a body that is not JSON, not an object or
  not a valid request, a body that could not be read, an app with dependency overrides, a
  request FastAPI's native OpenTelemetry telemetry is tracing) goes to FastAPI's handler,
  which reads the body again from the request's cache and answers exactly as before: the
  same 422s, 400s and spans, from the same code.

Both ways the body is read once, by the same ``Request``, and an exception raised by a
dependency or the endpoint travels through the same exception middleware (the one JSON
error shape, the refusal record).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from fastapi.telemetry import get_telemetry_data
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

Guard = Callable[..., Awaitable[Any]]


class SearchRoute(APIRoute):
    """An ``APIRoute`` with the shortcut above, for an endpoint of a JSON body model and the
    ``Request`` that returns a ``Response``, whose dependencies take the request alone (the
    search guard). A route of any other shape keeps FastAPI's handler only."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        general = super().get_route_handler()
        shape = shortcut_shape(self)
        if shape is None:
            return general
        model, body_name, request_name, guards = shape
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            try:
                raw = await request.body()
            except HTTPException:  # the body limit's 413: raised as FastAPI's handler raises it
                raise
            except Exception:  # the client gone mid-body...: FastAPI's handler answers it (400)
                return await general(request)
            body = well_formed(raw, request.headers.get("content-type"), model)
            if body is None or request.app.dependency_overrides or get_telemetry_data() is not None:
                return await general(request)
            for guard, name in guards:
                await guard(**{name: request})
            response: Response = await endpoint(**{body_name: body, request_name: request})
            return response

        return handler


def shortcut_shape(
    route: APIRoute,
) -> tuple[type[BaseModel], str, str, tuple[tuple[Guard, str], ...]] | None:
    """(body model, its parameter, the request's parameter, the guards) of an endpoint
    ``async def f(body: Model, request: Request)`` whose dependencies are coroutine
    functions of the request alone; None for any other shape."""
    dependant = route.dependant
    if (
        len(dependant.body_params) != 1
        or dependant.path_params or dependant.query_params
        or dependant.header_params or dependant.cookie_params
        or dependant.request_param_name is None
        or dependant.response_param_name or dependant.background_tasks_param_name
        or not inspect.iscoroutinefunction(route.endpoint)
    ):
        return None
    field = dependant.body_params[0]
    model = field.field_info.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)) or route.body_field is not field:
        return None
    guards: list[tuple[Guard, str]] = []
    for sub in dependant.dependencies[: len(route.dependencies)]:
        if (
            sub.call is None or not inspect.iscoroutinefunction(sub.call)
            or sub.dependencies or sub.body_params or sub.path_params or sub.query_params
            or sub.header_params or sub.cookie_params or sub.request_param_name is None
        ):
            return None
        guards.append((sub.call, sub.request_param_name))
    if len(guards) != len(dependant.dependencies):  # the endpoint's own Depends: not handled
        return None
    return model, field.name, dependant.request_param_name, tuple(guards)


def well_formed(raw: bytes, content_type: str | None, model: type[BaseModel]) -> BaseModel | None:
    """``raw`` as ``model`` when it is a JSON object of the right shape sent as
    ``application/json``; None for anything FastAPI's handler should answer itself."""
    if not raw or content_type is None or content_type.lower() != "application/json":
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError; nested too deep
        return None
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None
