"""Config loading: the formats other clients write, validation, expansion, defaults, secrets."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from supervisor import log
from supervisor.actors import Backoff, Intensity, Strategy, SupervisorError
from supervisor.config import Config, ConfigError, FieldError, ServerType, load_config
from supervisor.config._load import inspect_config
from supervisor.config._model import DEFAULT_MAX_CONFIG_BYTES, AuthConfig
from supervisor.config._secrets import command_line

SECRET = "ghp_s3cr3t-t0ken-value"


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    log.redactor.clear()


def write(path: Path, document: object | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def errors_of(document: object, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(document, environ={}, **kwargs)  # type: ignore[arg-type]
    return str(info.value).splitlines()


def one(document: dict[str, object], **kwargs: object) -> Config:
    return load_config(document, **{"environ": {}, **kwargs})  # type: ignore[arg-type]


class TestFormats:
    def test_claude_code_mcp_json(self, tmp_path: Path) -> None:
        """A Claude Code .mcp.json (stdio, sse, http, oauth) loads with its documented fields."""
        path = write(
            tmp_path / ".mcp.json",
            {
                "mcpServers": {
                    "shared-server": {"type": "http", "url": "https://example.com/mcp"},
                    "my-tool": {
                        "command": "node",
                        "args": ["./my-mcp-server.js"],
                        "env": {"DEBUG": "${DEBUG:-false}"},
                    },
                    "remote-api": {
                        "type": "sse",
                        "url": "https://api.example.com/mcp/sse",
                        "headers": {"Authorization": "Bearer ${API_TOKEN}"},
                    },
                    "http-service": {
                        "type": "http",
                        "url": "https://api.example.com/mcp",
                        "headers": {"X-API-Key": "${API_KEY}"},
                    },
                    "sentry": {
                        "type": "http",
                        "url": "https://mcp.sentry.dev/mcp",
                        "oauth": {"clientId": "my-client", "callbackPort": 8080, "scopes": "a b"},
                    },
                }
            },
        )
        config = load_config(path, environ={"API_TOKEN": SECRET, "API_KEY": "k-123456789"})
        s = config.servers
        assert list(s) == ["shared-server", "my-tool", "remote-api", "http-service", "sentry"]
        assert s["shared-server"].type is ServerType.HTTP
        assert not s["shared-server"].remote_fallback
        assert s["my-tool"].type is ServerType.STDIO
        assert s["my-tool"].command == "node"
        assert s["my-tool"].args == ("./my-mcp-server.js",)
        assert dict(s["my-tool"].env) == {"DEBUG": "false"}
        assert s["remote-api"].type is ServerType.SSE
        assert s["remote-api"].headers["Authorization"] == f"Bearer {SECRET}"
        assert s["http-service"].headers["X-API-Key"] == "k-123456789"
        assert s["sentry"].auth == AuthConfig(
            client_id="my-client", callback_port=8080, scopes=("a", "b")
        )
        assert config.path == path.absolute() and config.project_root == tmp_path.absolute()
        assert not config.invalid

    def test_cursor_mcp_json(self, tmp_path: Path) -> None:
        """A Cursor .cursor/mcp.json: ${env:NAME}, ${workspaceFolder}, envFile and auth load."""
        write(tmp_path / ".env", "# comment\nexport DB_URL=postgres://db\nQUOTED='a b'\n")
        path = write(
            tmp_path / ".cursor" / "mcp.json",
            {
                "mcpServers": {
                    "server-name": {
                        "command": "npx",
                        "args": ["-y", "mcp-server"],
                        "env": {"API_KEY": "value"},
                    },
                    "userjot": {
                        "url": "https://api.userjot.com/v1/mcp",
                        "headers": {"Authorization": "Bearer ${env:USERJOT_API_TOKEN}"},
                    },
                    "local": {
                        "command": "python",
                        "args": ["${workspaceFolder}/server.py"],
                        "envFile": "${workspaceFolder}/.env",
                    },
                    "mittwald": {
                        "url": "https://mcp.mittwald.de/mcp",
                        "auth": {
                            "CLIENT_ID": "cursor-client",
                            "CLIENT_SECRET": "cursor-client-secret",
                            "scopes": ["mcp", "offline_access"],
                        },
                    },
                }
            },
        )
        config = load_config(path, environ={"USERJOT_API_TOKEN": SECRET})
        s = config.servers
        assert s["userjot"].headers["Authorization"] == f"Bearer {SECRET}"
        assert s["userjot"].type is ServerType.HTTP and s["userjot"].remote_fallback
        assert s["local"].args == (f"{tmp_path.absolute()}/server.py",)
        assert dict(s["local"].env) == {"DB_URL": "postgres://db", "QUOTED": "a b"}
        auth = s["mittwald"].auth
        assert auth is not None and auth.client_id == "cursor-client"
        assert auth.client_secret == "cursor-client-secret"
        assert auth.scopes == ("mcp", "offline_access")
        assert config.project_root == path.parent.absolute()  # ${PROJECT_ROOT}: the file's dir

    def test_opencode_json(self, tmp_path: Path) -> None:
        """An opencode.json `mcp` section loads: local command arrays, environment, enabled,
        {env:NAME}, oauth, timeouts in milliseconds; OpenCode's other keys are ignored."""
        path = write(
            tmp_path / "opencode.json",
            """{
              "$schema": "https://opencode.ai/config.json",
              "model": "anthropic/claude-sonnet-4-5",
              "theme": "opencode",
              "mcp": {
                "my-local-mcp-server": {
                  "type": "local",
                  // Or ["bun", "x", "my-mcp-command"]
                  "command": ["npx", "-y", "my-mcp-command"],
                  "enabled": true,
                  "environment": {"MY_ENV_VAR": "my_env_var_value"},
                },
                "jira": {"type": "remote", "url": "https://jira.example.com/mcp", "enabled": false},
                "my-api": {
                  "type": "remote",
                  "url": "https://example.com/mcp",
                  "headers": {"Authorization": "Bearer {env:MY_API_KEY}"},
                  "oauth": false,
                  "timeout": 15000
                },
                "sso": {
                  "type": "remote",
                  "url": "https://mcp.example.com/mcp",
                  "oauth": {"clientId": "{client}", "clientSecret": "shh-secret", "scope": "r w"}
                }
              }
            }""",
        )
        config = load_config(path, environ={"MY_API_KEY": SECRET})
        s = config.servers
        local = s["my-local-mcp-server"]
        assert local.type is ServerType.STDIO and local.command == "npx"
        assert local.args == ("-y", "my-mcp-command")
        assert dict(local.env) == {"MY_ENV_VAR": "my_env_var_value"}
        assert not local.disabled
        assert s["jira"].disabled and s["jira"].remote_fallback
        assert s["jira"].type is ServerType.HTTP
        assert s["my-api"].headers["Authorization"] == f"Bearer {SECRET}"
        assert s["my-api"].auth == AuthConfig(enabled=False)
        assert s["my-api"].timeout == 15.0
        assert s["sso"].auth is not None and s["sso"].auth.scopes == ("r", "w")

    def test_opencode_v2_nested_servers(self) -> None:
        """The nested `mcp.servers` form loads, with `timeout: {startup, request}` in ms."""
        config = one(
            {
                "mcp": {
                    "servers": {
                        "my-server": {
                            "type": "local",
                            "command": ["npx", "-y", "example-mcp-server"],
                            "cwd": "tools",
                            "disabled": True,
                            "timeout": {"startup": 5000, "request": 60000},
                        }
                    }
                }
            },
            project_root="/proj",
        )
        server = config.servers["my-server"]
        assert server.path == "mcp.servers.my-server"
        assert server.disabled and server.cwd == Path("/proj/tools")
        assert (server.init_timeout, server.timeout) == (5.0, 60.0)

    def test_vscode_mcp_json(self, tmp_path: Path) -> None:
        """A .vscode/mcp.json loads: `inputs` ignored, ${workspaceFolder} is the workspace,
        and a server using ${input:...} is invalid, naming the input, the others fine."""
        path = write(
            tmp_path / ".vscode" / "mcp.json",
            """{
              "inputs": [
                {"type": "promptString", "id": "perplexity-key",
                 "description": "Perplexity API Key", "password": true}
              ],
              "servers": {
                "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
                "perplexity": {
                  "type": "stdio",
                  "command": "npx",
                  "args": ["-y", "server-perplexity-ask"],
                  "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}
                },
                "fs": {
                  "type": "stdio",
                  "command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-filesystem", "${workspaceFolder}"]
                },
                "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}
              }
            }""",
        )
        config = load_config(path, environ={})
        assert config.servers["fs"].args[-1] == str(tmp_path.absolute())
        assert config.servers["github"].type is ServerType.HTTP
        assert not config.servers["github"].remote_fallback
        assert list(config.invalid) == ["perplexity"]
        (error,) = config.servers["perplexity"].errors
        assert error.path == "servers.perplexity.env.PERPLEXITY_API_KEY"
        assert "${input:perplexity-key}" in error.message

    def test_own_format_with_supervisor_section(self) -> None:
        """Our own fields and the supervisor section load into typed, snake_case values."""
        config = one(
            {
                "supervisor": {
                    "strategy": "rest_for_one",
                    "intensity": {"maxRestarts": 5, "withinSeconds": 60},
                    "backoff": {
                        "local": {"initial": 0.5, "max": 10, "maxAttempts": 3},
                        "remote": {"multiplier": 3, "jitter": 0.2, "stableAfter": 120},
                    },
                    "limits": {"maxToolsPerServer": 50, "maxMessageBytes": 1048576},
                    "requestTimeout": 20,
                    "initTimeout": 5,
                    "pingInterval": 0,
                    "pingTimeout": 3,
                },
                "mcpServers": {
                    "echo": {
                        "command": "python",
                        "args": ["-m", "echo"],
                        "prefix": "e",
                        "description": "echo tools",
                        "lazy": False,
                        "inheritEnv": True,
                        "approve": ["delete_*"],
                        "autoApprove": True,
                    },
                    "api": {"url": "wss://api.example.com/mcp", "timeoutMs": 2500},
                },
            }
        )
        st = config.settings
        assert st.strategy is Strategy.REST_FOR_ONE
        assert st.intensity == Intensity(max_restarts=5, within_seconds=60)
        assert st.local_backoff == Backoff(initial=0.5, maximum=10, jitter=0.2, stable_after=30)
        assert st.local_max_attempts == 3
        assert st.remote_backoff == Backoff(
            initial=1, maximum=60, multiplier=3, jitter=0.2, stable_after=120
        )
        assert st.remote_max_attempts == 10
        assert st.limits.max_tools_per_server == 50
        assert st.limits.max_message_bytes == 1048576
        assert st.limits.max_config_bytes == DEFAULT_MAX_CONFIG_BYTES
        assert (st.request_timeout, st.init_timeout, st.ping_timeout) == (20, 5, 3)
        assert st.ping_interval == 0
        echo, api = config.servers["echo"], config.servers["api"]
        assert (echo.prefix, echo.description, echo.lazy, echo.inherit_env) == (
            "e",
            "echo tools",
            False,
            True,
        )
        assert (echo.approve, echo.auto_approve) == (("delete_*",), True)
        assert (echo.timeout, echo.init_timeout, echo.ping_interval) == (20, 5, 0)
        assert echo.backoff == st.local_backoff and echo.max_attempts == 3
        assert api.type is ServerType.WS and api.timeout == 2.5
        assert api.backoff == st.remote_backoff

    def test_claude_desktop_config_json(self, tmp_path: Path) -> None:
        """Claude Desktop's own file loads as it is: its top-level keys (preferences,
        globalShortcut) belong to the app and are ignored, with a debug line naming them."""
        path = write(
            tmp_path / "claude_desktop_config.json",
            {
                "globalShortcut": "Alt+Space",
                "mcpServers": {
                    "filesystem": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"],
                    },
                    "weather": {"command": "uv", "args": ["run", "weather.py"]},
                },
                "preferences": {"menuBarEnabled": False, "quickEntryShortcut": "off"},
            },
        )
        # Debug lines are captured whatever level an earlier test configured.
        before = structlog.get_config()
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        try:
            with capture_logs() as logs:
                config = load_config(path, environ={})
        finally:
            structlog.configure(**before)
        assert list(config.servers) == ["filesystem", "weather"]
        assert config.servers["filesystem"].args[-1] == "/home/me"
        assert [(e["event"], e["keys"]) for e in logs] == [
            ("ignored the client's own top-level keys", ["globalShortcut", "preferences"])
        ]

    def test_jsonc_comments_and_trailing_commas(self, tmp_path: Path) -> None:
        """Comments and trailing commas are accepted; `//` inside strings is kept."""
        path = write(
            tmp_path / "c.json",
            '{\n  /* block */ "mcpServers": {\n'
            '    "a": {"url": "https://h/x//y"}, // note\n  },\n}',
        )
        assert load_config(path, environ={}).servers["a"].url == "https://h/x//y"


class TestTypes:
    @pytest.mark.parametrize(
        ("server", "expected", "fallback"),
        [
            pytest.param({"command": "x"}, ServerType.STDIO, False, id="command-is-stdio"),
            pytest.param({"url": "https://h/mcp"}, ServerType.HTTP, True, id="url-is-http"),
            pytest.param({"url": "ws://h/mcp"}, ServerType.WS, False, id="ws-url-is-ws"),
            pytest.param({"url": "WSS://h/mcp"}, ServerType.WS, False, id="wss-url-is-ws"),
            pytest.param({"type": "local", "command": "x"}, ServerType.STDIO, False, id="local"),
            pytest.param(
                {"type": "streamable-http", "url": "http://h"}, ServerType.HTTP, False, id="sh"
            ),
            pytest.param({"type": "sse", "url": "http://h"}, ServerType.SSE, False, id="sse"),
            pytest.param({"type": "remote", "url": "http://h"}, ServerType.HTTP, True, id="rem"),
            pytest.param({"type": "ws", "url": "wss://h"}, ServerType.WS, False, id="ws"),
        ],
    )
    def test_type_is_given_or_inferred(
        self, server: dict[str, object], expected: ServerType, fallback: bool
    ) -> None:
        """`type` is read, or inferred: command → stdio, ws(s):// → ws, other url → http."""
        s = one({"mcpServers": {"s": server}}).servers["s"]
        assert (s.type, s.remote_fallback) == (expected, fallback)

    def test_type_must_match_command_or_url(self) -> None:
        """A stdio type with a url, or a remote type with a command, is an error at `type`."""
        assert errors_of(
            {
                "mcpServers": {
                    "a": {"type": "stdio", "url": "https://h"},
                    "b": {"type": "sse", "command": "x"},
                }
            }
        ) == [
            'mcpServers.a.type: "stdio" needs "command", not "url"',
            'mcpServers.b.type: "sse" needs "url", not "command"',
        ]

    def test_ws_scheme_is_checked(self) -> None:
        """A ws server's URL must be ws:// or wss://, an http one's http:// or https://."""
        assert errors_of(
            {"mcpServers": {"a": {"type": "ws", "url": "https://h"}, "b": {"url": "ftp://h"}}}
        ) == [
            "mcpServers.a.url: URL must start with ws:// or wss://",
            "mcpServers.b.url: URL must start with http:// or https://",
        ]


class TestExpansion:
    def test_variables_defaults_and_escapes(self) -> None:
        """${VAR}, ${VAR:-default} (also when empty), ${env:VAR} and $${ expand as documented."""
        server = one(
            {
                "mcpServers": {
                    "s": {
                        "command": "${BIN}",
                        "args": [
                            "${UNSET:-fallback}",
                            "${EMPTY:-used}",
                            "$${LITERAL}",
                            "${env:BIN}",
                        ],
                        "env": {"A": "${EMPTY}", "B": "pre-${BIN}-post"},
                    }
                }
            },
            environ={"BIN": "server", "EMPTY": ""},
        ).servers["s"]
        assert server.command == "server"
        assert server.args == ("fallback", "used", "${LITERAL}", "server")
        assert dict(server.env) == {"A": "", "B": "pre-server-post"}

    def test_project_root_of_a_file_and_cwd_relative_to_it(self, tmp_path: Path) -> None:
        """${PROJECT_ROOT} is the file's directory; a relative cwd is resolved against it."""
        path = write(
            tmp_path / "cfg" / "mcp.json",
            {"mcpServers": {"s": {"command": "${PROJECT_ROOT}/bin/s", "cwd": "work"}}},
        )
        server = load_config(path, environ={"PROJECT_ROOT": "/elsewhere"}).servers["s"]
        root = (tmp_path / "cfg").absolute()
        assert server.command == f"{root}/bin/s"
        assert server.cwd == root / "work"

    def test_project_root_of_a_mapping(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """For a mapping, ${PROJECT_ROOT} is the current directory, or `project_root=`."""
        monkeypatch.chdir(tmp_path)
        document = {"mcpServers": {"s": {"command": "x", "args": ["${PROJECT_ROOT}"]}}}
        assert one(document).servers["s"].args == (str(tmp_path.absolute()),)
        assert one(document, project_root="/p").servers["s"].args == ("/p",)
        assert one(document, project_root="/p").project_root == Path("/p")

    def test_expansion_only_in_allowed_fields(self) -> None:
        """Only command, args, env, cwd, url and headers expand; description and tool lists
        keep ${...} as written."""
        server = one(
            {
                "mcpServers": {
                    "s": {
                        "url": "https://${HOST}/mcp",
                        "headers": {"X-Host": "${HOST}"},
                        "description": "talks to ${HOST}",
                        "approve": ["${HOST}_*"],
                    }
                }
            },
            environ={"HOST": "example.com"},
        ).servers["s"]
        assert server.url == "https://example.com/mcp"
        assert server.headers["X-Host"] == "example.com"
        assert server.description == "talks to ${HOST}"
        assert server.approve == ("${HOST}_*",)

    def test_variables_in_auth_are_refused(self) -> None:
        """A ${...} in an auth field is an error saying it is not expanded there."""
        (line,) = errors_of(
            {"mcpServers": {"s": {"url": "https://h", "auth": {"clientSecret": "${S}"}}}}
        )
        assert line.startswith("mcpServers.s.auth.clientSecret: ${...} is not expanded here")
        assert line.endswith("name the variable: clientSecretEnv")

    def test_a_client_secret_is_read_from_the_file_or_variable_it_names(
        self, tmp_path: Path
    ) -> None:
        """``clientSecretFile`` (relative to the config) and ``clientSecretEnv`` give a
        server's client secret when the config loads — a secret like one written in it;
        one that cannot be read makes that server invalid, naming where it looked and
        never a value; two ways at once are refused."""
        (tmp_path / "docs.secret").write_text("from-the-file\n")
        grant = {"grant": "client_credentials", "clientId": "me"}
        servers = {
            "file": {"url": "https://a/mcp", "auth": {**grant, "clientSecretFile": "docs.secret"}},
            "env": {"url": "https://b/mcp", "auth": {**grant, "clientSecretEnv": "B_SECRET"}},
            "unset": {"url": "https://c/mcp", "auth": {**grant, "clientSecretEnv": "C_SECRET"}},
        }
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}))
        config = load_config(path, environ={"B_SECRET": "from-the-env"})
        loaded = config.servers
        assert loaded["file"].auth is not None and loaded["env"].auth is not None
        assert loaded["file"].auth.client_secret == "from-the-file"
        assert loaded["env"].auth.client_secret == "from-the-env"
        assert [str(e) for e in loaded["unset"].errors] == [
            "mcpServers.unset.auth.clientSecretEnv: the client secret: environment "
            "variable C_SECRET is not set"
        ]
        assert sorted(config.secrets()) == ["from-the-env", "from-the-file"]
        assert "from-the-env" not in repr(loaded["env"])
        both = {"s": {"url": "https://h", "auth": {**grant, "clientSecret": "x",
                                                   "clientSecretEnv": "B_SECRET"}}}  # fmt: skip
        assert errors_of({"mcpServers": both}) == [
            "mcpServers.s.auth: sets clientSecret and clientSecretEnv: the client secret is "
            "given once"
        ]

    def test_malformed_references_are_structural_errors(self) -> None:
        """An unterminated, nested or unsupported ${...} makes load_config raise."""
        assert errors_of(
            {"mcpServers": {"s": {"command": "x", "args": ["${A", "${A:-${B}}", "${/}"]}}}
        ) == [
            "mcpServers.s.args[0]: unterminated or nested ${...}; write $${ for a literal ${",
            "mcpServers.s.args[1]: unterminated or nested ${...}; write $${ for a literal ${",
            "mcpServers.s.args[2]: unsupported ${...}: use ${NAME}, ${NAME:-default}, "
            "${env:NAME}, ${PROJECT_ROOT}, ${workspaceFolder} or ${userHome}",
        ]

    def test_missing_variable_fails_that_server_only(self) -> None:
        """A missing variable makes only its server invalid; the error names the variable and
        the field, never a value, even when other variables of that server have values."""
        config = load_config(
            {
                "mcpServers": {
                    "github": {
                        "command": "gh-mcp",
                        "args": ["--user", "${GH_USER}"],
                        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "OTHER": "${OTHER_SECRET}"},
                    },
                    "fine": {
                        "url": "https://h/mcp",
                        "headers": {"Authorization": "${OTHER_SECRET}"},
                    },
                }
            },
            environ={"OTHER_SECRET": SECRET, "GH_USER": "octocat-user"},
        )
        github, fine = config.servers["github"], config.servers["fine"]
        assert fine.valid and fine.headers["Authorization"] == SECRET
        assert not github.valid
        assert github.errors == (
            FieldError(
                "mcpServers.github.env.GITHUB_TOKEN",
                "environment variable GITHUB_TOKEN is not set",
            ),
        )
        assert github.error == (
            "mcpServers.github.env.GITHUB_TOKEN: environment variable GITHUB_TOKEN is not set"
        )
        assert config.invalid == {"github": github.errors}
        assert SECRET not in github.error and "octocat-user" not in github.error
        assert SECRET not in repr(config) and SECRET not in str(config)
        assert github.env["GITHUB_TOKEN"] == "${GITHUB_TOKEN}"  # left unexpanded, not empty

    def test_missing_envfile_fails_that_server_only(self, tmp_path: Path) -> None:
        """An envFile that does not exist is an error of its server, not of the config."""
        config = load_config(
            {"mcpServers": {"s": {"command": "x", "envFile": "missing.env"}}},
            environ={},
            project_root=tmp_path,
        )
        assert config.servers["s"].errors == (
            FieldError("mcpServers.s.envFile", "env file not found"),
        )

    def test_the_files_an_entry_pulls_in_are_listed_with_the_digest_of_what_was_read(
        self, tmp_path: Path
    ) -> None:
        """Config.included lists each envFile and fault plan file read while loading, with
        the SHA-256 of its bytes (None for a missing one); key files, read only when a
        server authenticates, are not among them."""
        import hashlib

        (tmp_path / ".env").write_text("MODE=fast\n")
        (tmp_path / "plan.json").write_text("[]")
        (tmp_path / "key.pem").write_text("not read while loading")
        config = load_config(
            write(
                tmp_path / "mcp.json",
                {
                    "mcpServers": {
                        "a": {"command": "x", "envFile": ".env", "faults": "plan.json"},
                        "b": {"command": "y", "envFile": "gone.env"},
                        "c": {
                            "url": "https://h.example/mcp",
                            "auth": {
                                "grant": "client_credentials",
                                "clientId": "me",
                                "privateKeyFile": "key.pem",
                            },
                        },
                    }
                },
            )
        )
        assert [(f.field, f.name, f.path, f.sha256) for f in config.included] == [
            (
                "mcpServers.a.faults",
                "plan.json",
                tmp_path / "plan.json",
                hashlib.sha256(b"[]").hexdigest(),
            ),
            (
                "mcpServers.a.envFile",
                ".env",
                tmp_path / ".env",
                hashlib.sha256(b"MODE=fast\n").hexdigest(),
            ),
            ("mcpServers.b.envFile", "gone.env", tmp_path / "gone.env", None),
        ]
        assert config.servers["a"].faults is not None
        assert config.servers["a"].faults.source == str(tmp_path / "plan.json")

    def test_credentials_appearing_after_expansion_fail_that_server(self) -> None:
        """A URL that has user:password once expanded makes its server invalid, quoting nothing."""
        config = one(
            {"mcpServers": {"s": {"url": "${URL}"}}},
            environ={"URL": f"https://me:{SECRET}@h/mcp"},
        )
        (error,) = config.servers["s"].errors
        assert error.path == "mcpServers.s.url"
        assert "credentials in the URL are refused" in error.message
        assert SECRET not in error.message

    def test_header_with_line_break_after_expansion_fails_that_server(self) -> None:
        """A header value that expands to a line break makes its server invalid."""
        config = one(
            {"mcpServers": {"s": {"url": "https://h", "headers": {"X-A": "${V}"}}}},
            environ={"V": "a\r\nInjected: yes"},
        )
        assert config.servers["s"].errors == (
            FieldError("mcpServers.s.headers.X-A", "header value contains a line break or NUL"),
        )

    def test_opencode_file_references_are_refused(self) -> None:
        """OpenCode's {file:...} is a config error; outside `mcp`, {env:...} stays literal."""
        (line,) = errors_of({"mcp": {"s": {"type": "local", "command": ["x", "{file:k.txt}"]}}})
        assert line == (
            "mcp.s.command[1]: OpenCode's {file:...} is not supported; use ${NAME} instead"
        )
        server = one({"mcpServers": {"s": {"command": "x", "args": ["{env:A}"]}}}).servers["s"]
        assert server.args == ("{env:A}",)


class TestErrors:
    def test_unknown_field_names_its_path(self) -> None:
        """An unknown field is reported with its dotted path and nothing else."""
        with pytest.raises(ConfigError) as info:
            load_config({"mcpServers": {"github": {"url": "https://h", "colour": "red"}}})
        assert str(info.value) == "mcpServers.github.colour: unknown field"
        assert info.value.errors == [FieldError("mcpServers.github.colour", "unknown field")]
        assert info.value.servers == {"github": "mcpServers.github"}
        assert isinstance(info.value, SupervisorError)

    def test_unknown_field_close_to_a_known_one_suggests_it(self) -> None:
        """A misspelt field (any case) is still an error, suggesting the field it resembles,
        in a server entry and in the objects inside it alike."""
        assert errors_of(
            {
                "mcpServers": {
                    "a": {"comand": "x", "arg": ["y"], "URL": "https://h"},
                    "b": {"url": "https://h", "heders": {}, "auth": {"clientid": "c"}},
                    "c": {"url": "https://h", "reconnect": {"maxAttempt": 1}},
                }
            }
        ) == [
            'mcpServers.a.comand: unknown field; did you mean "command"?',
            'mcpServers.a.arg: unknown field; did you mean "args"?',
            'mcpServers.a.URL: unknown field; did you mean "url"?',
            'mcpServers.a: needs either "command" (a local server) or "url" (a remote server)',
            'mcpServers.b.heders: unknown field; did you mean "headers"?',
            'mcpServers.b.auth.clientid: unknown field; did you mean "clientId"?',
            'mcpServers.c.reconnect.maxAttempt: unknown field; did you mean "maxAttempts"?',
        ]

    @pytest.mark.parametrize(
        ("typed", "meant"),
        [("evn", "env"), ("emv", "env"), ("cdw", "cwd"), ("ulr", "url"), ("Evn", "env")],
    )
    def test_one_slip_in_a_short_field_name_suggests_it(self, typed: str, meant: str) -> None:
        """A short name one slip from a field (two letters swapped, one wrong) — too few
        letters for likeness by ratio — still gets the suggestion; one further off not."""
        entry = {"command": "x", typed: {}}
        assert errors_of({"mcpServers": {"a": entry}}) == [
            f'mcpServers.a.{typed}: unknown field; did you mean "{meant}"?'
        ]
        assert errors_of({"mcpServers": {"a": {"command": "x", "vne": {}}}}) == [
            "mcpServers.a.vne: unknown field"
        ]

    def test_a_structural_error_leaves_the_other_servers_loaded(self) -> None:
        """One server's structural error (a VS Code ``dev`` block) makes ``load_config``
        raise; ``inspect_config`` has it beside the servers with no error of their own,
        loaded all the same with their environment's problems (what ``check`` reports),
        so that those are not hidden until the first is fixed."""
        document = {
            "servers": {
                "calc": {"command": "python3", "dev": {"watch": "src/**/*.py"}},
                "gh": {"command": "npx", "env": {"TOKEN": "${CHECK_NOT_SET_1}"}},
                "fine": {"url": "https://example.com/mcp"},
            }
        }
        dev = (
            "servers.calc.dev: not supported (VS Code's development mode: watch and debug); "
            "remove it"
        )
        with pytest.raises(ConfigError) as info:
            load_config(document, environ={})
        assert [str(e) for e in info.value.errors] == [dev]
        found = inspect_config(document, environ={})
        assert [str(e) for e in found.errors] == [dev] and found.config is None
        assert found.entries == {n: f"servers.{n}" for n in ("calc", "gh", "fine")}
        loaded = found.servers
        assert list(loaded) == ["gh", "fine"]
        assert [str(e) for e in loaded["gh"].errors] == [
            "servers.gh.env.TOKEN: environment variable CHECK_NOT_SET_1 is not set"
        ]
        assert loaded["fine"].valid and loaded["fine"].url == "https://example.com/mcp"

    def test_every_error_is_reported_at_once(self) -> None:
        """Structural errors across servers and sections are all listed, in file order."""
        assert errors_of(
            {
                "supervisor": {"strategy": "one_for_some", "limits": {"maxToolsPerServer": 0}},
                "mcpServers": {
                    "a": {"command": 3, "timeout": -1, "args": "x"},
                    "b": {"command": "x", "url": "https://h"},
                    "c": {},
                    "d": {"command": "x", "env": {"A": True}, "disabled": "yes"},
                    "e": {"url": "https://h", "timeout": 30000},
                    "f": {"command": "x", "restartOnCrash": False, "maxRestarts": 3},
                    "g": {"url": "https://h", "maxRestarts": 2, "args": []},
                    "h": {"command": "x", "headers": {}, "reconnect": False},
                    "bad name": {"command": "x"},
                    "i": "npx server",
                },
            }
        ) == [
            'supervisor.strategy: must be one of "one_for_one", "one_for_all", "rest_for_one"',
            "supervisor.limits.maxToolsPerServer: must be at least 1",
            "mcpServers.a.command: must be a string or an array of strings, not a number",
            "mcpServers.a.timeout: must be greater than 0",
            "mcpServers.a.args: must be an array of strings, not a string",
            'mcpServers.b: has both "command" and "url"; a server is either local (command) '
            "or remote (url)",
            'mcpServers.c: needs either "command" (a local server) or "url" (a remote server)',
            "mcpServers.d.env.A: must be a string, not a boolean",
            "mcpServers.d.disabled: must be true or false, not a string",
            "mcpServers.e.timeout: is in seconds and 30000 s is more than an hour; "
            "for milliseconds use timeoutMs",
            "mcpServers.f.maxRestarts: has no effect with restartOnCrash: false",
            "mcpServers.g.args: applies to local (stdio) servers only",
            "mcpServers.g.maxRestarts: applies to local (stdio) servers only; "
            "for a remote server use reconnect",
            "mcpServers.h.headers: applies to remote servers only",
            "mcpServers.h.reconnect: applies to remote servers only; "
            "for a local server use restartOnCrash and maxRestarts",
            'mcpServers."bad name": invalid server name: use 1-64 letters, digits, '
            "'_', '-' or '.', starting with a letter or digit",
            "mcpServers.i: must be an object, not a string",
        ]

    def test_credentials_in_url_are_refused(self) -> None:
        """A URL with user:password is refused with advice, without quoting the URL."""
        (line,) = errors_of({"mcpServers": {"s": {"url": "https://user:pa55word@host/mcp"}}})
        assert line.startswith("mcpServers.s.url: credentials in the URL are refused")
        assert '"headers"' in line and '"auth"' in line
        assert "pa55word" not in line

    def test_foreign_fields_we_do_not_support_are_explained(self) -> None:
        """Fields of other clients that we do not support say what to do instead."""
        lines = errors_of(
            {
                "mcpServers": {"a": {"url": "https://h", "headersHelper": "/bin/h"}},
                "servers": {"b": {"command": "x", "dev": {"watch": "src/**"}}},
            }
        )
        assert lines[0].startswith("mcpServers.a.headersHelper: not supported (a Claude Code")
        assert lines[1].startswith("servers.b.dev: not supported (VS Code's development mode")

    def test_aliases_may_not_both_be_given(self) -> None:
        """Two spellings of one field (env/environment, enabled/disabled) is an error."""
        assert errors_of(
            {
                "mcp": {
                    "s": {
                        "command": ["x"],
                        "env": {},
                        "environment": {},
                        "enabled": True,
                        "disabled": False,
                    }
                }
            }
        ) == [
            'mcp.s.environment: duplicates "env"; set only one of them',
            'mcp.s.disabled: duplicates "enabled"; set only one of them',
        ]

    def test_duplicate_json_keys_are_errors(self, tmp_path: Path) -> None:
        """A key given twice in one JSON object is reported instead of silently overwritten."""
        path = write(
            tmp_path / "d.json",
            '{"mcpServers": {"a": {"command": "x"}, "a": {"url": "https://h"}}}',
        )
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(info.value) == "mcpServers.a: given more than once"

    def test_top_level_keys(self) -> None:
        """Another client's top-level keys are ignored; a key close to "supervisor" is an
        error, and so, in a file without servers, is one close to a server section's key."""
        assert one({"servers": {}, "extra": 1, "server": {"port": 4096}}).servers == {}
        assert errors_of({"mcpServer": {}}) == [
            'mcpServer: unknown top-level key; did you mean "mcpServers"?',
            '<config>: no MCP servers: expected a top-level "mcpServers", "mcp" or "servers" '
            "object",
        ]
        assert errors_of({"preferences": {}}) == [
            '<config>: no MCP servers: expected a top-level "mcpServers", "mcp" or "servers" '
            "object",
        ]
        assert errors_of({"mcpServers": {}, "supervisr": {"strategy": "one_for_all"}}) == [
            'supervisr: unknown top-level key; did you mean "supervisor"?'
        ]

    def test_the_supervisor_section_is_checked_strictly(self) -> None:
        """Unknown keys inside our own section are errors, in a client's file too."""
        assert errors_of(
            {
                "preferences": {"menuBarEnabled": False},
                "mcpServers": {"a": {"command": "x"}},
                "supervisor": {"strategy": "one_for_all", "intensty": {}, "colour": 1},
            }
        ) == [
            'supervisor.intensty: unknown field; did you mean "intensity"?',
            "supervisor.colour: unknown field",
        ]

    def test_auth_rules(self) -> None:
        """auth: loopback redirect URIs, ports, known grants, and client_credentials' needs."""
        assert errors_of(
            {
                "mcpServers": {
                    "a": {
                        "url": "https://h",
                        "auth": {"grant": "client_credentials", "clientId": "id"},
                    },
                    "b": {
                        "url": "https://h",
                        "auth": {"redirectUri": "https://example.com/cb", "callbackPort": 70000},
                    },
                    "c": {"url": "wss://h", "auth": {"clientId": "x"}},
                    "d": {"command": "x", "oauth": False},
                    "e": {"url": "https://h", "auth": {"scopes": 3, "grant": "implicit", "x": 1}},
                }
            }
        ) == [
            "mcpServers.a.auth: the client_credentials grant needs clientId, and clientSecret "
            "(or clientSecretFile, clientSecretEnv) or privateKeyFile",
            "mcpServers.b.auth.redirectUri: must be an http:// URL on a loopback host "
            "(127.0.0.1, localhost or [::1])",
            "mcpServers.b.auth.callbackPort: must be a port number, 1-65535",
            "mcpServers.c.auth: OAuth is not available for WebSocket servers; send "
            'credentials in "headers"',
            "mcpServers.d.oauth: applies to remote servers only",
            "mcpServers.e.auth.scopes: must be a string or an array of strings, not a number",
            'mcpServers.e.auth.grant: must be one of "authorization_code", '
            '"client_credentials", "identity_assertion", "workload_identity"',
            "mcpServers.e.auth.x: unknown field",
        ]

    def test_auth_rules_of_the_machine_grants(self) -> None:
        """The new auth fields: each grant's needs, secrets never inline, field paths; an
        IdP client with no secret is a public one (``none``), never both."""
        idp = {"tokenEndpoint": "https://idp/token", "clientId": "c", "idTokenEnv": "T"}
        assert errors_of(
            {
                "mcpServers": {
                    "a": {
                        "url": "https://h",
                        "auth": {
                            "grant": "identity_assertion",
                            "clientId": "c",
                            "clientSecret": "s",
                            "idp": {"tokenEndpoint": "ftp://idp", "clientSecret": "inline"},
                        },
                    },
                    "b": {
                        "url": "https://h",
                        "auth": {
                            "grant": "client_credentials",
                            "clientId": "c",
                            "clientSecret": "s",
                            "privateKeyFile": "key.pem",
                            "signingAlgorithm": "HS256",
                        },
                    },
                    "c": {
                        "url": "https://h",
                        "auth": {"clientMetadataUrl": "https://client.example/", "account": ""},
                    },
                    "d": {"url": "https://h", "auth": {"grant": "identity_assertion"}},
                    "e": {
                        "url": "https://h",
                        "auth": {
                            "idp": {
                                **idp,
                                "clientSecretEnv": "S",
                                "tokenEndpointAuthMethod": "none",
                            }
                        },
                    },
                    "f": {
                        "url": "https://h",
                        "auth": {"idp": {**idp, "tokenEndpointAuthMethod": "client_secret_post"}},
                    },
                }
            }
        ) == [
            "mcpServers.a.auth.idp.tokenEndpoint: must be an https:// URL",
            "mcpServers.a.auth.idp.clientSecret: is never written in the config: use "
            "clientSecretFile or clientSecretEnv (a file or an environment variable that "
            "holds it)",
            'mcpServers.a.auth.idp: needs "clientId"',
            'mcpServers.b.auth.signingAlgorithm: must be one of "RS256", "RS384", "RS512", '
            '"PS256", "PS384", "PS512", "ES256", "ES384", "ES512"',
            "mcpServers.b.auth.privateKeyFile: is an alternative to clientSecret; set only "
            "one of them",
            "mcpServers.c.auth.clientMetadataUrl: must be an https:// URL with a path (a "
            "client ID metadata document)",
            "mcpServers.c.auth.account: must not be empty",
            "mcpServers.d.auth: the identity_assertion grant needs clientId and clientSecret "
            "(or clientSecretFile, clientSecretEnv)",
            'mcpServers.d.auth: the identity_assertion grant needs "idp" (the identity provider)',
            'mcpServers.e.auth.idp: has a client secret, and tokenEndpointAuthMethod "none" (a '
            "public client, which has none): drop one of them",
            'mcpServers.f.auth.idp: tokenEndpointAuthMethod "client_secret_post" needs '
            '"clientSecretFile" or "clientSecretEnv" (without them the client is a public '
            'one: "none")',
        ]

    def test_full_auth_struct(self) -> None:
        """Every auth field is read into AuthConfig, camelCase to snake_case."""
        auth = (
            one(
                {
                    "mcpServers": {
                        "s": {
                            "url": "https://h/mcp",
                            "auth": {
                                "grant": "client_credentials",
                                "clientId": "cid",
                                "clientSecret": "csecret-value",
                                "scopes": ["read", "write"],
                                "redirectUri": "http://127.0.0.1:8765/callback",
                                "callbackPort": 8765,
                                "tokenEndpointAuthMethod": "client_secret_post",
                                "authServerMetadataUrl": "https://auth.example.com/.well-known/x",
                                "clientName": "my agent",
                            },
                        }
                    }
                }
            )
            .servers["s"]
            .auth
        )
        assert auth == AuthConfig(
            grant="client_credentials",
            client_id="cid",
            client_secret="csecret-value",
            scopes=("read", "write"),
            redirect_uri="http://127.0.0.1:8765/callback",
            callback_port=8765,
            token_endpoint_auth_method="client_secret_post",
            auth_server_metadata_url="https://auth.example.com/.well-known/x",
            client_name="my agent",
        )
        assert "csecret-value" not in repr(auth)

    def test_prefix_defaults_to_the_name_and_may_be_empty(self) -> None:
        """`prefix` defaults to the server's name; "" means no prefix; others are checked."""
        config = one(
            {"mcpServers": {"git-hub": {"command": "x"}, "b": {"command": "x", "prefix": ""}}}
        )
        assert config.servers["git-hub"].prefix == "git-hub"
        assert config.servers["b"].prefix == ""
        (line,) = errors_of({"mcpServers": {"a": {"command": "x", "prefix": "a b"}}})
        assert line.startswith("mcpServers.a.prefix: must be empty or 1-64 letters")


class TestFiles:
    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is a ConfigError naming the file."""
        with pytest.raises(ConfigError, match=r"nope\.json: no such file"):
            load_config(tmp_path / "nope.json")

    def test_invalid_json_gives_line_and_column(self, tmp_path: Path) -> None:
        """Invalid JSON is reported with its line and column."""
        path = write(tmp_path / "bad.json", '{\n  "mcpServers": {\n    "a": {"command" "x"}\n}}')
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(info.value) == (
            f"{path}: invalid JSON at line 3, column 21: Expecting ':' delimiter"
        )

    def test_size_limit_is_checked_before_parsing(self, tmp_path: Path) -> None:
        """A file over 256 KiB is refused unparsed; `max_config_bytes=` can raise the limit."""
        padding = "x" * DEFAULT_MAX_CONFIG_BYTES
        path = write(
            tmp_path / "big.json",
            {"mcpServers": {"s": {"command": "x", "description": padding}}},
        )
        with pytest.raises(ConfigError, match="more than the 262144-byte limit"):
            load_config(path)
        loaded = load_config(path, max_config_bytes=2 * DEFAULT_MAX_CONFIG_BYTES)
        assert loaded.servers["s"].description == padding

    def test_file_can_lower_its_own_limit(self, tmp_path: Path) -> None:
        """A maxConfigBytes smaller than the file is enforced after parsing."""
        path = write(
            tmp_path / "c.json",
            {"supervisor": {"limits": {"maxConfigBytes": 10}}, "mcpServers": {}},
        )
        with pytest.raises(ConfigError) as info:
            load_config(path)
        assert str(info.value).startswith("supervisor.limits.maxConfigBytes: the file is")


class TestMerging:
    def test_sections_merge_in_file_order(self) -> None:
        """Servers from mcpServers, mcp and servers in one file are merged."""
        config = one(
            {
                "servers": {"c": {"command": "x"}},
                "mcpServers": {"a": {"command": "x"}},
                "mcp": {"b": {"type": "local", "command": ["x"]}},
            }
        )
        assert list(config.servers) == ["c", "a", "b"]
        assert config.servers["b"].path == "mcp.b"

    def test_name_collision_names_both_paths(self) -> None:
        """The same server name in two sections is an error naming both places."""
        assert errors_of(
            {"mcpServers": {"github": {"command": "x"}}, "servers": {"github": {"command": "y"}}}
        ) == ['servers.github: server "github" is also defined at mcpServers.github']


class TestRestartDefaults:
    def test_local_and_remote_defaults(self) -> None:
        """Local: 1,2,4…30 s and 5 restarts; remote: 1,2,4…60 s and 10 reconnections; each
        delay jittered by 0.2 (an upper bound)."""
        config = one({"mcpServers": {"l": {"command": "x"}, "r": {"url": "https://h"}}})
        local, remote = config.servers["l"], config.servers["r"]
        assert local.backoff == Backoff(
            initial=1, maximum=30, multiplier=2, jitter=0.2, stable_after=30
        )
        assert local.max_attempts == 5
        assert remote.backoff == Backoff(
            initial=1, maximum=60, multiplier=2, jitter=0.2, stable_after=30
        )
        assert remote.max_attempts == 10
        assert (local.timeout, local.init_timeout, local.ping_interval) == (30, 10, 10)
        assert local.lazy and not local.disabled and not local.inherit_env

    def test_overrides(self) -> None:
        """maxRestarts, restartOnCrash: false, reconnect: false and a reconnect object apply."""
        config = one(
            {
                "mcpServers": {
                    "a": {"command": "x", "maxRestarts": 2},
                    "b": {"command": "x", "restartOnCrash": False},
                    "c": {"url": "https://h", "reconnect": False},
                    "d": {"url": "https://h", "reconnect": {"maxAttempts": 3, "max": 5}},
                    "e": {"url": "https://h", "reconnect": True},
                }
            }
        )
        s = config.servers
        assert [s[n].max_attempts for n in "abcde"] == [2, 0, 0, 3, 10]
        assert [s[n].restart_on_crash for n in "abcde"] == [True, False, False, True, True]
        assert s["d"].backoff == Backoff(initial=1, maximum=5, jitter=0.2, stable_after=30)

    def test_backoff_max_must_not_be_below_initial(self) -> None:
        """A backoff whose max is below its initial delay is an error at that object."""
        assert errors_of(
            {
                "supervisor": {"backoff": {"remote": {"initial": 10, "max": 5}}},
                "mcpServers": {"r": {"url": "https://h", "reconnect": {"max": 0.5}}},
            }
        ) == [
            "supervisor.backoff.remote: max must be at least initial",
            "mcpServers.r.reconnect: max must be at least initial",
        ]


class TestToolNames:
    def test_template_and_clash_policy(self) -> None:
        servers: dict[str, object] = {"mcpServers": {}}
        config = one(
            {"supervisor": {"toolNames": {"template": "mcp__{server}__{tool}"}}, **servers}
        )
        assert config.settings.tool_name_template == "mcp__{server}__{tool}"
        assert config.settings.tool_clash == "suffix"
        config = one({"supervisor": {"toolNames": {"clash": "hash"}}, **servers})
        assert (config.settings.tool_name_template, config.settings.tool_clash) == (
            "{prefix}_{tool}",
            "hash",
        )

    def test_bad_templates_and_policies_name_the_field(self) -> None:
        assert errors_of(
            {
                "supervisor": {"toolNames": {"template": "{srv}_{tool}", "clash": "rename"}},
                "mcpServers": {},
            }
        ) == [
            "supervisor.toolNames.template: has an unknown placeholder {srv}; use {prefix}, "
            "{server} and {tool}",
            'supervisor.toolNames.clash: must be one of "suffix", "hash", "error"',
        ]
        for template in ("{prefix}", "{tool}_{tool}"):
            names = {"toolNames": {"template": template}}
            assert errors_of({"supervisor": names, "mcpServers": {}}) == [
                "supervisor.toolNames.template: must contain {tool} exactly once"
            ]
        names = {"toolNames": {"template": "a}{tool}"}}
        assert errors_of({"supervisor": names, "mcpServers": {}}) == [
            "supervisor.toolNames.template: has an unbalanced brace"
        ]


class TestSecrets:
    def test_secrets_are_collected_and_redacted_while_held(self) -> None:
        """Header values, secret-named env values, secret query parameters and option
        values, and client secrets are secrets; other values, short or long, are not.
        Loading registers none of them: a redaction scope (open_supervisor's) holds them."""
        config = one(
            {
                "mcpServers": {
                    "a": {
                        "command": "x",
                        "args": ["--api-key", "argsecret1", "--port", "8080"],
                        "env": {"GITHUB_PAT": "short", "LEVEL": "info", "LONGVAL": "12345678"},
                    },
                    "b": {
                        "url": "https://h/mcp?api_key=querysecret&region=eu",
                        "headers": {"Authorization": f"Bearer {SECRET}"},
                        "auth": {"clientSecret": "client-secret-1"},
                    },
                }
            }
        )
        expected = {
            "argsecret1",
            "short",
            "querysecret",
            f"Bearer {SECRET}",
            SECRET,
            "client-secret-1",
        }
        assert set(config.secrets()) == expected
        assert len(log.redactor) == 0  # loading registers nothing
        with log.redacting(config.secrets()):
            for secret in expected:
                assert secret in log.redactor
            assert log.redact(f"token={SECRET}") == "token=***"
        assert "info" not in config.secrets() and "8080" not in config.secrets()
        assert "12345678" not in config.secrets()  # long, but nothing says it is secret
        assert log.redact(f"token={SECRET}") == f"token={SECRET}"  # released

    def test_a_path_or_a_setting_is_no_secret(self) -> None:
        """A value is secret by its name, never by its length: one server's long ``env``
        path (``GIT_BASE_DIR``, ``HOME``) is not registered, so another server's argument
        that contains it is shown whole; a secret-named value still is registered."""
        config = one(
            {
                "mcpServers": {
                    "git": {
                        "command": "uvx",
                        "args": ["mcp-server-git"],
                        "env": {
                            "GIT_BASE_DIR": "/home/me/projects/ws",
                            "HOME": "/home/me",
                            "LOG_FORMAT": "json-lines",
                            "GITLAB_TOKEN": "glpat-s3cret-value",
                        },
                    },
                    "sqlite": {
                        "command": "npx",
                        "args": ["-y", "mcp-sqlite", "/home/me/projects/ws/shop.db"],
                    },
                }
            }
        )
        assert config.secrets() == ["glpat-s3cret-value"]
        with log.redacting(config.secrets()):
            shown = log.redact(command_line(config.servers["sqlite"]))
            assert shown == "npx -y mcp-sqlite /home/me/projects/ws/shop.db"
            assert log.redact("token glpat-s3cret-value") == "token ***"

    def test_what_a_secret_named_variable_expanded_to_is_a_secret(self) -> None:
        """``${NAME}`` with a secret-looking name makes its value a secret wherever it is
        expanded — an argument of no secret-looking option, an env value of a plain name,
        a URL's path, with its default too — masked in the command line and ``repr()``;
        a plain variable's value (a path) is not. So is a URL's password in an argument or
        an env value."""
        environ = {"DB_PASSWORD": "hunter2-pw", "ACCESS_TOKEN": "tok-in-path", "DATA": "/srv/d"}
        dsn = "postgres://me:dsn-pw-1@db/app"
        config = one(
            {
                "mcpServers": {
                    "db": {
                        "command": "db-mcp",
                        "args": ["--db", "${DB_PASSWORD}", "--dir", "${DATA}", "--dsn=" + dsn],
                        "env": {
                            "CONN": "${DB_PASSWORD}",
                            "FALLBACK": "${MISSING_SECRET:-default-secret}",
                            "DATABASE_URL": "mysql://u:env-pw-22@h:3306/x",
                        },
                    },
                    "api": {"url": "https://h/mcp/${ACCESS_TOKEN}/sse"},
                }
            },
            environ=environ,
        )
        secrets = config.secrets()
        for secret in ("hunter2-pw", "tok-in-path", "default-secret", "dsn-pw-1", "env-pw-22"):
            assert secret in secrets
        assert "/srv/d" not in secrets
        db = config.servers["db"]
        assert db.secret_values == ("hunter2-pw", "default-secret")
        assert command_line(db) == "db-mcp --db *** --dir /srv/d --dsn=postgres://me:***@db/app"
        for text in (repr(db), repr(config.servers["api"])):
            for secret in secrets:
                assert secret not in text
        assert "secret_values=('***', '***')" in repr(db)

    def test_what_add_asked_for_without_echo_is_a_secret(self, tmp_path: Path) -> None:
        """The values in an env file of ``.mcp-supervisor/`` (where ``add --env KEY``
        keeps what it asked for without echo) are secrets whatever their names; another
        env file's values are secret by name only."""
        (tmp_path / ".mcp-supervisor").mkdir()
        (tmp_path / ".mcp-supervisor" / "db.env").write_text("CONN=typed-unseen-1\n")
        (tmp_path / "plain.env").write_text("DATA_DIR=/srv/data\nAPI_KEY=named-secret\n")
        servers = {
            "db": {"command": "db-mcp", "envFile": ".mcp-supervisor/db.env"},
            "fs": {"command": "fs-mcp", "envFile": "plain.env"},
        }
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}))
        config = load_config(path)
        assert config.servers["db"].env == {"CONN": "typed-unseen-1"}
        assert sorted(config.secrets()) == ["named-secret", "typed-unseen-1"]

    def test_repr_and_str_mask_secrets(self) -> None:
        """repr() and str() of a config never show env or header values or other secrets."""
        config = one(
            {
                "mcpServers": {
                    "a": {"command": "x", "args": ["--token=argsecret1"], "env": {"K": "v1"}},
                    "b": {
                        "url": "https://h/mcp?token=querysecret",
                        "headers": {"Authorization": SECRET},
                        "auth": {"clientSecret": "client-secret-1"},
                    },
                }
            }
        )
        for text in (repr(config), str(config), repr(config.servers["b"]), str(config.servers)):
            for secret in (SECRET, "v1", "argsecret1", "querysecret", "client-secret-1"):
                assert secret not in text
        assert "headers={'Authorization': '***'}" in repr(config.servers["b"])
        assert "env={'K': '***'}" in repr(config.servers["a"])


def run_check(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CHECK_TEST_TOKEN"}
    if token is not None:
        env["CHECK_TEST_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "supervisor", "check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def program(path: Path, mode: int = 0o755) -> Path:
    """A tiny executable script at ``path`` (``mode`` 0o644 makes it not executable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


class TestCheckCommand:
    @pytest.fixture(autouse=True)
    def _npx_on_path(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The example config runs npx: a stand-in on PATH makes it found anywhere."""
        program(tmp_path / "path-bin" / "npx")
        path = os.pathsep.join([str(tmp_path / "path-bin"), os.environ.get("PATH", "")])
        monkeypatch.setenv("PATH", path)

    def config(self, tmp_path: Path) -> Path:
        return write(
            tmp_path / "mcp.json",
            {
                "mcpServers": {
                    "github": {
                        "url": "https://api.githubcopilot.com/mcp/",
                        "headers": {"Authorization": "Bearer ${CHECK_TEST_TOKEN}"},
                    },
                    "fs": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                        "env": {"FS_SECRET": "${CHECK_TEST_TOKEN}"},
                    },
                }
            },
        )

    def test_valid_config_exits_0_with_a_summary(self, tmp_path: Path) -> None:
        """A valid config exits 0, summarising each server's name, type and target on stdout,
        never an env or header value."""
        result = run_check("--config", str(self.config(tmp_path)), token=SECRET)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].endswith("mcp.json: 2 servers")
        assert lines[1].split() == ["github", "remote", "https://api.githubcopilot.com/mcp/"]
        assert lines[2].split() == [
            "fs", "stdio", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"
        ]  # fmt: skip
        assert SECRET not in result.stdout + result.stderr
        assert result.stderr == ""

    def test_json_output(self, tmp_path: Path) -> None:
        """--json prints one JSON document on stdout."""
        result = run_check("--config", str(self.config(tmp_path)), "--json", token=SECRET)
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["ok"] is True
        assert [s["name"] for s in document["servers"]] == ["github", "fs"]
        assert SECRET not in result.stdout

    def test_missing_variable_exits_2_naming_it(self, tmp_path: Path) -> None:
        """A server missing a variable fails the check: exit 2, errors on stderr, one per line."""
        result = run_check("--config", str(self.config(tmp_path)))
        assert result.returncode == 2
        assert result.stdout == ""
        assert result.stderr.splitlines() == [
            "mcpServers.github.headers.Authorization: environment variable CHECK_TEST_TOKEN "
            "is not set",
            "mcpServers.fs.env.FS_SECRET: environment variable CHECK_TEST_TOKEN is not set",
        ]

    def test_structural_errors_exit_2(self, tmp_path: Path) -> None:
        """Structural errors exit 2 with one field-path error per line on stderr."""
        path = write(
            tmp_path / "bad.json",
            {"mcpServers": {"github": {"url": "https://h", "heders": {}}, "x": {"command": 1}}},
        )
        result = run_check("--config", str(path))
        assert result.returncode == 2
        assert result.stdout == ""
        assert result.stderr.splitlines() == [
            'mcpServers.github.heders: unknown field; did you mean "headers"?',
            "mcpServers.x.command: must be a string or an array of strings, not a number",
        ]

    def test_claude_desktop_file_passes(self, tmp_path: Path) -> None:
        """Claude Desktop's own file, with the app's top-level keys, passes the check."""
        path = write(
            tmp_path / "claude_desktop_config.json",
            {
                "mcpServers": {"notes": {"command": sys.executable, "args": ["notes.py"]}},
                "globalShortcut": "Alt+Space",
                "preferences": {"menuBarEnabled": False},
            },
        )
        result = run_check("--config", str(path))
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0].endswith("claude_desktop_config.json: 1 server")
        assert result.stderr == ""

    def test_json_output_on_structural_errors_lists_the_servers_found(self, tmp_path: Path) -> None:
        """--json on structural errors still has "servers": the entries found, each with
        its own errors — null for what was not validated, and a structurally sound one
        checked in full; "errors" lists them all, and stderr says nothing."""
        path = write(
            tmp_path / "bad.json",
            {
                "mcpServers": {
                    "github": {"url": "https://h", "heders": {}},
                    "fs": {"command": "no-such-mcp-server-x2"},
                    "bad name": {"command": 1},
                }
            },
        )
        result = run_check("--config", str(path), "--json")
        assert result.returncode == 2
        assert result.stderr == ""  # the document says it all
        document = json.loads(result.stdout)
        unvalidated = dict.fromkeys(("type", "target", "disabled", "lazy", "prefix"))
        not_found = {
            "path": "mcpServers.fs.command",
            "message": '"no-such-mcp-server-x2" is not on PATH; install it, or give its full path',
        }
        fs = {
            "name": "fs",
            "type": "stdio",
            "target": "no-such-mcp-server-x2",
            "disabled": False,
            "lazy": True,
            "prefix": "fs",
            "errors": [not_found],
        }
        heders = {
            "path": "mcpServers.github.heders",
            "message": 'unknown field; did you mean "headers"?',
        }
        bad_name = [
            {
                "path": 'mcpServers."bad name"',
                "message": "invalid server name: use 1-64 letters, digits, '_', '-' or '.', "
                "starting with a letter or digit",
            },
            {
                "path": 'mcpServers."bad name".command',
                "message": "must be a string or an array of strings, not a number",
            },
        ]
        assert document == {
            "ok": False,
            "path": str(path),
            "servers": [
                {"name": "github", **unvalidated, "errors": [heders]},
                fs,
                {"name": "bad name", **unvalidated, "errors": bad_name},
            ],
            "errors": [heders, *bad_name, not_found],
        }

    def test_one_server_s_structural_error_hides_no_other_s_problem(self, tmp_path: Path) -> None:
        """A VS Code ``dev`` block in one server, a misspelt field in another: each
        server's problems are reported at once — the others' unset variables and missing
        programs included — one per line with its field path."""
        path = write(
            tmp_path / "mcp.json",
            {
                "servers": {
                    "calc": {"command": "python3", "dev": {"watch": "src/**/*.py"}},
                    "other": {"command": "npx", "evn": {"A": "1"}},
                    "gh": {"command": "npx", "env": {"TOKEN": "${CHECK_TEST_TOKEN}"}},
                    "fs": {"command": "no-such-mcp-server-x3"},
                    "ok": {"command": "npx"},
                }
            },
        )
        result = run_check("--config", str(path))
        assert result.returncode == 2
        assert result.stdout == ""
        assert result.stderr.splitlines() == [
            "servers.calc.dev: not supported (VS Code's development mode: watch and debug); "
            "remove it",
            'servers.other.evn: unknown field; did you mean "env"?',
            "servers.gh.env.TOKEN: environment variable CHECK_TEST_TOKEN is not set",
            'servers.fs.command: "no-such-mcp-server-x3" is not on PATH; install it, or give '
            "its full path",
        ]

    def test_json_output_has_the_errors_and_stderr_nothing(self, tmp_path: Path) -> None:
        """--json with a server missing a variable: the error is in the document, once;
        stderr stays empty."""
        result = run_check("--config", str(self.config(tmp_path)), "--json")
        assert result.returncode == 2 and result.stderr == ""
        document = json.loads(result.stdout)
        assert document["ok"] is False and len(document["errors"]) == 2
        assert document["errors"][0]["path"] == "mcpServers.github.headers.Authorization"

    def test_json_output_for_an_unreadable_file_has_no_servers(self, tmp_path: Path) -> None:
        """--json for a missing file: "servers" is empty, the one error names the file."""
        missing = str(tmp_path / "missing.json")
        result = run_check("--config", missing, "--json")
        assert result.returncode == 2
        assert json.loads(result.stdout) == {
            "ok": False,
            "path": missing,
            "servers": [],
            "errors": [{"path": missing, "message": "no such file"}],
        }

    def test_disabled_server_missing_a_variable_does_not_fail(self, tmp_path: Path) -> None:
        """A disabled server's missing variable is reported on stderr but the check passes."""
        path = write(
            tmp_path / "mcp.json",
            {
                "mcpServers": {
                    "off": {
                        "url": "https://h",
                        "headers": {"A": "${CHECK_TEST_TOKEN}"},
                        "disabled": True,
                    }
                }
            },
        )
        result = run_check("--config", str(path))
        assert result.returncode == 0, result.stderr
        assert "(disabled)" in result.stdout
        assert result.stderr.strip() == (
            "mcpServers.off.headers.A: environment variable CHECK_TEST_TOKEN is not set "
            "(server is disabled)"
        )

    def test_command_not_on_path_exits_2_saying_what_to_do(self, tmp_path: Path) -> None:
        """A local server whose command is on no PATH fails the check, naming the server's
        field and the command and saying what to do; a remote server is not looked up."""
        path = write(
            tmp_path / "mcp.json",
            {
                "mcpServers": {
                    "fs": {"command": "no-such-mcp-server-x1", "args": ["--root", "/tmp"]},
                    "ok": {"command": "npx"},
                    "web": {"url": "https://example.com/mcp"},
                }
            },
        )
        result = run_check("--config", str(path))
        assert result.returncode == 2
        assert result.stdout == ""
        assert result.stderr.splitlines() == [
            'mcpServers.fs.command: "no-such-mcp-server-x1" is not on PATH; install it, or '
            "give its full path"
        ]

    def test_the_servers_own_path_is_searched(self, tmp_path: Path) -> None:
        """With PATH in a server's env, the command is looked for there (as the process
        will), not on the PATH check runs with."""
        program(tmp_path / "tools" / "my-mcp-server")
        path = write(
            tmp_path / "mcp.json",
            {
                "mcpServers": {
                    "mine": {
                        "command": "my-mcp-server",
                        "env": {"PATH": str(tmp_path / "tools")},
                    },
                    "theirs": {"command": "npx", "env": {"PATH": str(tmp_path / "tools")}},
                }
            },
        )
        result = run_check("--config", str(path))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            'mcpServers.theirs.command: "npx" is not on the PATH set in its env; install it, '
            "or give its full path"
        ]

    def test_command_paths_must_be_executable_files(self, tmp_path: Path) -> None:
        """A command given as a path (relative to the server's cwd) must exist, be a file
        and be executable; each problem says which."""
        program(tmp_path / "bin" / "server")
        program(tmp_path / "bin" / "script.py", mode=0o644)
        path = write(
            tmp_path / "mcp.json",
            {
                "mcpServers": {
                    "good": {"command": str(tmp_path / "bin" / "server")},
                    "relative": {"command": "./server", "cwd": "bin"},
                    "missing": {"command": "./nope/server", "cwd": "bin"},
                    "folder": {"command": str(tmp_path / "bin")},
                    "script": {"command": "bin/script.py"},
                }
            },
        )
        result = subprocess.run(
            [sys.executable, "-m", "supervisor", "check", "--config", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            check=False,
        )
        assert result.returncode == 2
        errors = json.loads(result.stdout)["errors"]
        assert errors == [
            {
                "path": "mcpServers.missing.command",
                "message": '"./nope/server" does not exist; install it there, or correct the path',
            },
            {
                "path": "mcpServers.folder.command",
                "message": f'"{tmp_path / "bin"}" is a directory, not a program',
            },
            {
                "path": "mcpServers.script.command",
                "message": '"bin/script.py" is not executable; make it so (chmod +x), or give '
                'its interpreter as the command (e.g. "python3") and the script in "args"',
            },
        ]
        servers = {s["name"]: s["errors"] for s in json.loads(result.stdout)["servers"]}
        assert servers["good"] == servers["relative"] == []
        assert servers["script"] == errors[2:]

    def test_disabled_server_with_a_missing_command_does_not_fail(self, tmp_path: Path) -> None:
        """A disabled server's missing command is reported, noted as disabled; exit 0."""
        path = write(
            tmp_path / "mcp.json",
            {"mcpServers": {"off": {"command": "no-such-mcp-server-x1", "disabled": True}}},
        )
        result = run_check("--config", str(path))
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip() == (
            'mcpServers.off.command: "no-such-mcp-server-x1" is not on PATH; install it, or '
            "give its full path (server is disabled)"
        )

    def test_unreadable_or_invalid_files_exit_2(self, tmp_path: Path) -> None:
        """A missing file and invalid JSON (with line and column) exit 2."""
        missing = run_check("--config", str(tmp_path / "missing.json"))
        assert missing.returncode == 2
        assert missing.stderr.strip() == f"{tmp_path / 'missing.json'}: no such file"
        path = write(tmp_path / "bad.json", '{"mcpServers": {,}}')
        invalid = run_check("--config", str(path))
        assert invalid.returncode == 2
        assert "invalid JSON at line 1, column 17" in invalid.stderr


def test_only_secrets_are_masked_by_check_list_and_status(tmp_path: Path) -> None:
    """One server's ``env`` path (``GIT_BASE_DIR``) masks nothing of another server: the
    other's path argument is shown whole by ``check``, ``list``, ``status`` and their
    ``--json``; a secret-named env value (found again in an argument) and a
    ``${DB_PASSWORD}`` expansion are masked in all of them."""
    from supervisor.testing.servers import stdio_params

    workspace = tmp_path / "projects" / "ws"
    command, args = stdio_params("echo", count_file=workspace / "shop.db")
    token, password = "glpat-0123456789abcdef", "hunter2-correct-horse"
    git_command, git_args = stdio_params("echo")
    path = write(
        tmp_path / "mcp.json",
        {
            "mcpServers": {
                "git": {
                    "command": git_command,
                    "args": git_args,
                    "env": {"GIT_BASE_DIR": str(workspace), "GITLAB_TOKEN": token},
                },
                "sqlite": {"command": command, "args": args},
                "vault": {
                    "command": sys.executable,
                    "args": ["-c", "pass", "--db", "${DB_PASSWORD}", f"--label={token}"],
                    "disabled": True,
                },
            },
            "supervisor": {"initTimeout": 60},
        },
    )
    environ = {**os.environ, "DB_PASSWORD": password}
    shown = f"-m supervisor.testing.servers echo --count-file {workspace / 'shop.db'}"
    outputs = []
    for command_args in (["check"], ["list"], ["status"]):
        for json_flag in ([], ["--json"]):
            done = subprocess.run(
                [sys.executable, "-m", "supervisor", *command_args, "--config", str(path)]
                + json_flag,
                capture_output=True,
                text=True,
                timeout=120,
                env=environ,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            assert done.returncode == 0, (command_args, done.stderr)
            assert shown in done.stdout, (command_args, json_flag, done.stdout)
            assert "--db *** --label=***" in done.stdout, (command_args, done.stdout)
            outputs.append(done.stdout + done.stderr)
    for output in outputs:
        assert token not in output and password not in output


class TestProtocol:
    """A server's ``protocol`` field: the era its connections speak, in every format."""

    @pytest.mark.parametrize(
        "document",
        [
            {"mcpServers": {"s": {"command": "x", "protocol": "2025-11-25"}}},
            {"mcp": {"s": {"type": "local", "command": ["x"], "protocol": "2025-11-25"}}},
            {"mcp": {"servers": {"s": {"type": "local", "command": ["x"], "protocol": "legacy"}}}},
            {"servers": {"s": {"type": "http", "url": "http://h/mcp", "protocol": "legacy"}}},
        ],
        ids=["mcpServers", "opencode", "opencode-v2", "vscode"],
    )
    def test_it_pins_the_handshake_era_in_every_format(self, document: dict[str, object]) -> None:
        """``2025-11-25`` (or ``legacy``, the same) is read from each client's section."""
        assert one(document).servers["s"].protocol == "2025-11-25"

    def test_it_is_auto_by_default_and_may_say_so(self) -> None:
        servers = one(
            {"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "protocol": "auto"}}}
        ).servers
        assert (servers["a"].protocol, servers["b"].protocol) == ("auto", "auto")

    @pytest.mark.parametrize("value", ["2026-07-28", "2024-11-05", "latest", 2025])
    def test_anything_else_is_an_error_naming_the_choices(self, value: object) -> None:
        (line,) = errors_of({"mcpServers": {"s": {"command": "x", "protocol": value}}})
        assert line.startswith("mcpServers.s.protocol: ")
        assert '"auto", "2025-11-25", "legacy"' in line or "must be a string" in line
