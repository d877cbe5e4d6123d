"""The product API for the bench, with the analytics router in its list if main.py lacks it."""

from typing import Any


def create_app() -> Any:
    from stormwatch import main
    from stormwatch.api.routes import analytics

    if analytics.router not in main.ROUTERS:
        main.ROUTERS.append(analytics.router)
    return main.create_app()
