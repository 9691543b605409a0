"""A setting handed to a server by name (`set_env: {NODE_ENV: production}`) is a word
texts hold, not a secret: it was redacted wherever it appeared, so an observation read
`re<secret:env_value> steps` for `reproduction steps`, and the recorded action and the
task instruction were rewritten (hunt 12-06q). A secret beside it still is redacted.
Real config parsing and the real Redactor, as the recorder builds it (`env_secrets`)."""

from __future__ import annotations

from worldtrace.sandboxes.mcp import MCPConfig
from worldtrace.schemas.parsing import parse
from worldtrace.schemas.redact import Redactor, env_secrets


def test_settings_a_server_reads_by_name_are_not_redacted():
    config = parse(
        MCPConfig,
        {
            "command": ["mcp-server-filesystem", "{workdir}"],
            "set_env": {
                "NODE_ENV": "production",
                "LOG_LEVEL": "warning",
                "APP_MODE": "readonly",
                "REQUEST_TIMEOUT": "300000",
                "API_TOKEN": "tok3nvalue9876",
            },
        },
    )
    assert env_secrets(config) == ["tok3nvalue9876"]
    text = "production checklist: reproduction steps (warning: readonly) tok3nvalue9876"
    out, n = Redactor(literals=env_secrets(config)).text(text)
    assert out == "production checklist: reproduction steps (warning: readonly) <secret:env_value>"
    assert n == 1
