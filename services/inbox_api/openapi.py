"""The OpenAPI 3.1 document of the inbox API, assembled from its routes: each route's handler
declares its operation where it is written (`operation`), with its request and response bodies
named by their models (`schemas`, `views`), whose JSON schemas are the document's components;
the document is built from the route table, so a route cannot go undocumented (nor a
documented route missing): `document(routes)` refuses either."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.routing import BaseRoute, Route

from .views import Error

F = TypeVar("F", bound=Callable[..., Any])
# handler → method ("get", "post", …; None: the route's only method) → its operation
OPERATIONS: dict[Callable[..., Any], dict[str | None, dict[str, Any]]] = {}

# every model an operation names, by name: the document's components
MODELS: dict[str, type[BaseModel]] = {}


def ref(model: type[BaseModel]) -> dict[str, Any]:
    """A reference to `model`'s schema, which joins the document's components."""
    MODELS[model.__name__] = model
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def many(model: type[BaseModel]) -> dict[str, Any]:
    return {"type": "array", "items": ref(model)}


_ERROR = ref(Error)


def answer(
    description: str, schema: type[BaseModel] | dict[str, Any] | None = None
) -> dict[str, Any]:
    """A response: `description`, and its JSON body's model (or schema) if it has one."""
    if isinstance(schema, type):
        schema = ref(schema)
    body: dict[str, Any] = {"description": description}
    if schema is not None:
        body["content"] = {"application/json": {"schema": schema}}
    return body


def errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "malformed request",
        401: "no or unknown token",
        403: "the token's role may not do this",
        404: "not found",
        408: "the request body did not arrive in time",
        409: "not waiting, or the version is no longer current",
        413: "the request body is larger than the inbox accepts (DESK_MAX_BODY)",
        422: "not allowed by the item, or incomplete",
        429: "too many wrong tokens from this address; retry after Retry-After seconds",
        503: "temporarily unavailable; retry later",
    }
    # every authenticated operation may be throttled, and every body is limited
    return {str(c): answer(text[c], _ERROR) for c in sorted({*codes, 408, 413, 429})}


def path_id(description: str, kind: str = "string") -> dict[str, Any]:
    return {
        "name": "id",
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": kind},
    }


def operation(
    summary: str,
    *,
    responses: dict[str, Any],
    method: str | None = None,
    operation_id: str | None = None,
    description: str | None = None,
    parameters: Sequence[dict[str, Any]] = (),
    request: dict[str, Any] | None = None,
) -> Callable[[F], F]:
    """Declare the operation a handler answers (for `method` of its route: for a handler of
    several methods, one declaration per method)."""

    def declare(handler: F) -> F:
        found: dict[str, Any] = {
            "operationId": operation_id or handler.__name__,
            "summary": summary,
            "responses": responses,
        }
        if description:
            found["description"] = description
        if parameters:
            found["parameters"] = list(parameters)
        if request is not None:
            found["requestBody"] = request
        OPERATIONS.setdefault(handler, {})[method] = found
        return handler

    return declare


def model_body(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    """A JSON request body of a request model (its schema among the components)."""
    return {"required": required, "content": {"application/json": {"schema": ref(model)}}}


def document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.path.startswith("/api/"):
            continue
        declared = OPERATIONS.get(route.endpoint, {})
        for method in sorted(route.methods or ()):
            if method == "HEAD":
                continue
            found = declared.get(method.lower()) or declared.get(None)
            if found is None:
                raise LookupError(f"{method} {route.path}: no operation declared")
            paths.setdefault(route.path, {})[method.lower()] = found
    schemas: dict[str, Any] = {}
    for name, model in sorted(MODELS.items()):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Ambient Desk inbox",
            "version": "1.0.0",
            "description": "Review drafts: list, inspect, decide; dead letters; trail.",
        },
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas,
        },
        "security": [{"token": []}],
        "paths": paths,
    }
