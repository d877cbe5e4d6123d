"""The API docs page works offline: every asset it loads is served by the product itself."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx

ASSET_TYPES = ("javascript", "text/css", "image/")


def test_the_docs_page_loads_only_same_origin_assets_that_the_api_serves(
        api: httpx.Client) -> None:
    r = api.get("/docs")
    assert r.status_code == 200, r.text
    html = r.text
    # Any absolute address in the page would be fetched from elsewhere (a CDN) by a browser.
    assert not re.search(r"https?://", html), re.findall(r"https?://\S+", html)
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets), \
        assets
    for asset in assets:
        parts = urlsplit(urljoin(str(r.url), asset))
        assert (parts.scheme, parts.netloc) == (r.url.scheme, f"{r.url.host}:{r.url.port}"), asset
        got = api.get(parts.path)
        assert got.status_code == 200, (asset, got.status_code)
        kind = got.headers["content-type"]
        assert any(t in kind for t in ASSET_TYPES), (asset, kind)
        assert len(got.content) > 1000, (asset, len(got.content))
    bundle = next(a for a in assets if a.endswith(".js"))
    assert b"SwaggerUIBundle" in api.get(bundle).content
    # The page reads the schema from the same origin too.
    assert "url: '/api/v1/openapi.json'" in html
    assert api.get("/api/v1/openapi.json").json()["info"]["title"] == "Stormwatch API"
