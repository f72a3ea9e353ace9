"""Translating Claude Code configuration: MCP entries, hooks, matchers and allowed-tools."""

from __future__ import annotations

import pytest

from mol.hcp import claude

ROOTS = {"CLAUDE_PLUGIN_ROOT": "vendor/p"}


def server(entry: dict) -> claude.Translation:
    return claude.mcp_server("s", entry, ".mcp.json", "vendor/p", ROOTS)


def test_a_stdio_entry_runs_in_its_root_with_paths_rewritten():
    out = server({"command": "${CLAUDE_PLUGIN_ROOT}/bin/serve", "args": [
        "--config", "${CLAUDE_PLUGIN_ROOT}/c.json"], "env": {"LEVEL": "debug"}})
    assert (out.problems, out.notes) == ([], [])
    assert out.value == {"command": "vendor/p/bin/serve", "cwd": "vendor/p",
                         "args": ["--config", "./c.json"], "env": {"LEVEL": "debug"}}
    assert server({"command": "./run.sh"}).value["command"] == "vendor/p/run.sh"
    assert server({"command": "npx"}).value["command"] == "npx"


@pytest.mark.parametrize(("env", "field", "value"), [
    ({"API_KEY": "${API_KEY}"}, "env_vars", ["API_KEY"]),
    ({"GITHUB_TOKEN": "${MY_GH}"}, "env_from", {"GITHUB_TOKEN": "MY_GH"}),
])
def test_env_references_map_to_mols_fields(env, field, value):
    out = server({"command": "x", "env": env})
    assert out.problems == [] and out.value[field] == value and "env" not in out.value


def test_a_default_in_a_reference_is_reported_not_kept():
    out = server({"command": "x", "env": {"REGION": "${REGION:-eu}"}})
    assert out.value["env_vars"] == ["REGION"]
    assert out.notes == [".mcp.json: mcpServers.s.env.REGION: the default 'eu' is not kept "
                         "(mol leaves REGION out when REGION is unset)"]


@pytest.mark.parametrize(("entry", "expected"), [
    ({"command": "x", "env": {"DB_PASSWORD": "hunter2"}},
     "mcpServers.s.env.DB_PASSWORD: a literal value for what looks like a secret"),
    ({"command": "x", "env": {"URL": "https://${HOST}/x"}},
     "mcpServers.s.env.URL: 'https://${HOST}/x' mixes text and variables"),
    ({"url": "https://e.com", "headers": {"Authorization": "Bearer abc"}},
     "mcpServers.s.headers.Authorization: a literal credential"),
    ({"url": "https://e.com", "headers": {"X-Api-Key": "abc"}},
     "mcpServers.s.headers.X-Api-Key: a literal credential"),
    ({"command": "x", "args": ["--token", "${TOKEN}"]},
     "mcpServers.s.args[1]: '${TOKEN}' refers to an environment variable"),
])
def test_what_cannot_be_written_safely_is_a_problem_naming_the_key(entry, expected):
    problems = server(entry).problems
    assert len(problems) == 1 and expected in problems[0]
    assert "hunter2" not in problems[0] and "abc" not in problems[0]


def test_http_entries_and_what_is_not_mapped():
    out = server({"type": "http", "url": "https://e.com/mcp", "timeout": 5, "headers": {
        "Authorization": "Bearer ${TOKEN}", "X-Key": "${KEY}", "X-Team": "mol"}})
    assert out.value == {"url": "https://e.com/mcp", "bearer_token_env_var": "TOKEN",
                         "env_http_headers": {"X-Key": "KEY"}, "http_headers": {"X-Team": "mol"}}
    assert out.notes == [".mcp.json: mcpServers.s.timeout: not mapped (mol's MCP servers have "
                         "no such field)"]
    sse = server({"type": "sse", "url": "https://e.com/sse"})
    assert sse.value is None and "type 'sse' is not supported" in sse.notes[0]


def test_hooks_translate_events_matchers_and_commands():
    data = {"hooks": {
        "PreToolUse": [{"matcher": "Bash|Edit", "hooks": [
            {"type": "command", "command": '"${CLAUDE_PLUGIN_ROOT}/guard.sh" --strict'},
            {"type": "command", "command": "jq -r .tool_input >> ~/log", "timeout": 5,
             "async": True},
            {"type": "prompt", "prompt": "Is this safe?"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify"}]}],
        "Stop": [{"hooks": [{"type": "http", "url": "https://e.com/hook"}]}],
    }}
    out = claude.hooks_config(data, "hooks.json", {"CLAUDE_PLUGIN_ROOT": "."})
    assert out.problems == []
    assert out.value == {"PreToolUse": [{"matcher": "terminal|edit_file", "hooks": [
        {"type": "command", "command": "./guard.sh --strict", "timeout": 600.0,
         "on_error": "allow"},
        {"type": "command", "command": "sh -c 'jq -r .tool_input >> ~/log'", "timeout": 5,
         "on_error": "allow"}]}]}
    assert out.notes == [
        "hooks.json: hooks.PreToolUse[0].hooks[1].async: not mapped (mol runs every hook to "
        "its end, in order)",
        "hooks.json: hooks.PreToolUse[0].hooks[2]: hook type 'prompt' is not supported (mol "
        "runs command hooks only); it will not run",
        "hooks.json: hooks.Notification: event not supported by mol; its 1 hook(s) will not run "
        f"(supported: {', '.join(claude.SUPPORTED_EVENTS)})",
        "hooks.json: hooks.Stop[0].hooks[0]: hook type 'http' is not supported (mol runs command "
        "hooks only); it will not run"]


@pytest.mark.parametrize(("matcher", "glob"), [
    ("", "*"), ("*", "*"), ("Bash", "terminal"), ("Write|Edit", "write_file|edit_file"),
    ("mcp__github__.*", "mcp__github__*"), ("Notebook.*", "Notebook*"),
])
def test_matchers_become_globs_over_mols_tool_names(matcher, glob):
    assert claude.tool_matcher(matcher) == glob


def test_allowed_tools_become_patterns_over_tool_names():
    out = claude.allowed_tools(["Bash(git add:*)", "Read", "mcp__plugin_demo_notes__add",
                                "mcp__other"], "review.md")
    # MCP names pass as Claude Code writes them; a bare server is all of its tools.
    assert out.value == ["terminal", "read_file", "mcp__plugin_demo_notes__add", "mcp__other__*"]
    assert out.notes == ["review.md: 'Bash(git add:*)': mol's policy is over tool names, so it "
                         "allows all of terminal"]


@pytest.mark.parametrize(("plugin", "server", "name"), [
    ("slack", "slack", "plugin_slack_slack"),  # mcp__plugin_slack_slack__slack_read_channel
    ("demo", "notes", "plugin_demo_notes"),
    ("my-plugin", "database-tools", "plugin_my-plugin_database-tools"),
    ("demo", "api.v2", "plugin_demo_api_v2"),  # Claude Code's key keeps only [A-Za-z0-9_-]
])
def test_a_plugins_server_is_named_as_claude_code_names_it(plugin, server, name):
    assert claude.plugin_server(plugin, server) == name
