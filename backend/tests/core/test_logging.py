"""No token of any kind core.security issues reaches a log line, whichever logger wrote it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from stormwatch.core.logging import redact
from stormwatch.core.security import TOKEN_KINDS, new_token

REPO = Path(__file__).resolve().parents[3]

# Runs in its own interpreter: logging is process-global, and this sets it up the way the
# API does under uvicorn (uvicorn's own handlers first, then ours).
SCRIPT = r'''
import json, logging, logging.config, sys
from uvicorn.config import LOGGING_CONFIG
from stormwatch.core.logging import setup_logging
from stormwatch.core.security import TOKEN_KINDS, new_token

logging.config.dictConfig(LOGGING_CONFIG)
setup_logging("DEBUG")
tokens = {kind: new_token(kind).token for kind in TOKEN_KINDS}
print(json.dumps(tokens), flush=True)
log = logging.getLogger("stormwatch.test")
for kind, tok in tokens.items():
    log.info("in the message %s| end", tok)
    log.info("as an argument: %s| end", tok)
    log.warning("as a mapping argument: %(t)s| end", {"t": tok})
    log.info("inside an object: %r| end", {"authorization": f"Bearer {tok}"})
    log.info(f"header=Authorization:Bearer_{tok}| end")
    try:
        raise ValueError(f"bad token {tok}")
    except ValueError:
        log.exception("in a traceback| end")
    # uvicorn's loggers have their own handlers and do not propagate to ours.
    try:
        raise RuntimeError(f"token={tok}")
    except RuntimeError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application| end")
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", f"/x?token={tok}", "1.1", 200)
'''


def test_every_token_shape_is_masked_in_every_log_line():
    env = {**os.environ, "PYTHONPATH": str(REPO / "backend")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    tokens = json.loads(proc.stdout.splitlines()[0])
    assert set(tokens) == set(TOKEN_KINDS)
    logged = proc.stderr + "\n".join(proc.stdout.splitlines()[1:])
    for kind, token in tokens.items():
        tag, secret = token.split("_", 1)
        assert secret not in logged, f"{kind} token leaked"
        assert secret[:8] not in logged, f"{kind} token prefix leaked"
        # The lines are still there, masked, not dropped.
        assert logged.count(f"{tag}_********") >= 7, (kind, logged)
    assert logged.count("| end") == 7 * len(tokens)
    assert logged.count("Traceback") >= 2 * len(tokens)
    # uvicorn's access formatter still gets its arguments (method, path, status).
    assert logged.count('"GET /x?token=') == len(tokens)
    assert " 200" in logged


def test_redact_masks_each_kind_wherever_it_sits_and_leaves_other_text_alone():
    for kind in TOKEN_KINDS:
        tok = new_token(kind).token
        tag = tok.split("_", 1)[0]
        for line in (tok, f"Bearer {tok}", f'{{"token":"{tok}"}}', f"x_{tok}", f"={tok}."):
            out = redact(line)
            assert tok not in out and f"{tag}_********" in out, (kind, line, out)
    assert redact("swarm_of_bees sw_1234567890 plain text") == \
        "swarm_of_bees sw_1234567890 plain text"


def test_redact_masks_webhook_signing_secrets_and_leaves_the_word_alone():
    from stormwatch.notifications.webhook import new_signing_secret

    for _ in range(20):  # base64 brings '+', '/' and '=' into some of them
        secret = new_signing_secret()
        for line in (secret, f"secret={secret}", f'{{"secret": "{secret}"}}'):
            out = redact(line)
            assert secret not in out and "whsec_********" in out, (line, out)
            assert secret.removeprefix("whsec_") not in out, (line, out)
    assert redact("the whsec_ prefix names a secret") == "the whsec_ prefix names a secret"
