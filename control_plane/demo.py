"""``govsearch demo``: engine up, demo data loaded, API served, examples printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from control_plane import local_engine
from control_plane.config import Settings
from control_plane.times import Clock

EXAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("oranges", {}),
    ("cheap chocolate", {}),
    ("chocolat sans arachide", {}),
    ("baby formula", {}),
    ("chocolate", {"user_id": "alice"}),
    ("chocolate", {"cohorts": ["vegan"]}),
]


DEMO_PRINCIPALS: list[tuple[str, list[str]]] = [
    ("merchandiser", ["author"]),
    ("reviewer", ["approver"]),
    ("auditor", ["auditor"]),
    ("storefront", ["search"]),
    ("admin", ["admin"]),
]


def demo_keys(engine: Any, settings: Settings, clock: Clock) -> dict[str, str]:
    """Fresh keys for the demo principals (earlier demo keys are revoked)."""
    from control_plane.lifecycle.keys import KeyStore

    store = KeyStore(engine, settings.auth.keys_index)
    now = clock()
    for entry in store.list():
        if entry.get("label") == "demo" and not entry.get("revoked_at"):
            store.revoke(entry["key_id"], now)
    return {
        name: store.create(name, roles, now, label="demo")[0] for name, roles in DEMO_PRINCIPALS
    }


def run(settings: Settings, host: str, port: int, clock: Clock) -> int:
    import json

    import uvicorn

    from control_plane.api import create_app
    from control_plane.api.serving import bound_client_times
    from control_plane.api.wire_lane import WireLaneProtocol
    from control_plane.bootstrap import prepare, profile_of
    from control_plane.engine import connect
    from control_plane.service import SearchService

    url = settings.engine.url
    if local_engine.probe(url) is None:
        local = settings.engine.local
        print(f"starting the local engine on port {local.port} ...", flush=True)
        url = local_engine.start(
            port=local.port,
            data_dir=Path(local.data_dir),
            heap=local.heap,
            timeout_s=local.start_timeout_s,
        ).url
        settings = settings.model_copy(
            update={"engine": settings.engine.model_copy(update={"url": url})}
        )
    engine = connect(settings.engine)
    ready = prepare(engine, settings, clock=clock)
    print(f"catalog: {ready.catalog.documents} products in {ready.catalog.index}")
    print(f"policies: version {ready.policy_set_version[:12]} live in {ready.policies_index}")
    print(f"personas: {ready.purchases} purchases loaded (alice, bruno, chloe)")
    print(f"\nAPI on http://{host}:{port}  (OpenAPI: http://{host}:{port}/docs)\nTry:")
    for intent, extra in EXAMPLES:
        body = json.dumps({"intent": intent, **extra}, ensure_ascii=False)
        print(
            f"  curl -s http://{host}:{port}/v1/search -H 'content-type: application/json' -d '{body}'"
        )
    keys = demo_keys(engine, settings, clock)
    print("\nAPI keys (workflow and audit endpoints need one; roles in docs/lifecycle.md):")
    for name, roles in DEMO_PRINCIPALS:
        print(f"  {name:<13} {','.join(roles):<9} {keys[name]}")
    base = f"http://{host}:{port}/v1/policies"
    print("Try the workflow:")
    print(f"  curl -s {base}/environments/live -H 'authorization: Bearer {keys['reviewer']}'")
    print(f"  curl -s '{base}/history?limit=5' -H 'authorization: Bearer {keys['auditor']}'")
    print("Compile and explain are internal (auth.open_internals is off): use a reviewing key:")
    print(
        f"  curl -s http://{host}:{port}/v1/compile -H 'content-type: application/json'"
        f" -H 'authorization: Bearer {keys['auditor']}' -d '{{\"intent\": \"cheap chocolate\"}}'"
    )
    print(flush=True)
    app = create_app(SearchService(settings, engine, profile_of(settings)), clock=clock)
    bound_client_times(settings.api)
    uvicorn.run(app, host=host, port=port, log_level="warning", http=WireLaneProtocol)
    return 0
