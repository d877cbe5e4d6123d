"""A small but real OpenID Connect provider for tests: discovery, JWKS, an authorization
endpoint that signs in whoever the test names (no login page), and a token endpoint that
checks the client's secret, the redirect URI and the PKCE (S256) verifier before it issues
an RS256-signed ID token. `nonce_override` and `foreign_key` make it misbehave
on purpose."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from stormwatch.devtools.services import free_port


class OidcProvider:
    def __init__(self, client_id: str, client_secret: str) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig",
                                                         "alg": "RS256"})
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.user: dict[str, Any] = {}  # the claims of whoever signs in next
        self.nonce_override: str | None = None
        self.foreign_key = False  # sign with a key the JWKS does not hold
        self.codes: dict[str, dict[str, Any]] = {}
        self.token_requests: list[dict[str, str]] = []
        self.pkce_checked = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/.well-known/openid-configuration":
                    self._json(200, outer.discovery())
                elif url.path == "/jwks":
                    self._json(200, KeySet([outer.key]).as_dict(private=False))
                elif url.path == "/authorize":
                    status, where = outer.authorize(query)
                    self.send_response(status)
                    self.send_header("location", where)
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                form = {k: v[0] for k, v in parse_qs(body).items()}
                status, doc = outer.token(form, self.headers.get("authorization", ""))
                self._json(status, doc)

            def _json(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True

    def discovery(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token", "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"]}

    def authorize(self, q: dict[str, str]) -> tuple[int, str]:
        if q.get("client_id") != self.client_id or q.get("response_type") != "code":
            return 400, "/error?unknown_client"
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return 302, f"{q['redirect_uri']}?" + urlencode(
                {"error": "invalid_request", "state": q.get("state", "")})
        code = secrets.token_urlsafe(24)
        with self.lock:
            self.codes[code] = {"challenge": q["code_challenge"], "nonce": q.get("nonce"),
                                "redirect_uri": q["redirect_uri"], "user": dict(self.user)}
        return 302, f"{q['redirect_uri']}?" + urlencode({"code": code, "state": q["state"]})

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, Any]]:
        self.token_requests.append(form)
        scheme, _, encoded = authorization.partition(" ")
        try:
            pair = base64.b64decode(encoded).decode() if scheme == "Basic" else ""
        except ValueError:
            pair = ""
        # RFC 6749 2.3.1: each part was form-encoded before Basic.
        given_id, _, given_secret = (unquote_plus(p) for p in pair.partition(":"))
        if (given_id, given_secret) != (self.client_id, self.client_secret):
            return 401, {"error": "invalid_client"}
        with self.lock:
            grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("grant_type") != "authorization_code":
            return 400, {"error": "invalid_grant"}
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant"}
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["challenge"]:
            return 400, {"error": "invalid_grant"}
        self.pkce_checked += 1
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300,
                  "nonce": self.nonce_override or grant["nonce"], **grant["user"]}
        key = RSAKey.generate_key(2048) if self.foreign_key else self.key
        id_token = jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, key)
        return 200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                     "expires_in": 300, "id_token": id_token}

    def __enter__(self) -> OidcProvider:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
