"""Plugin bundles in an artifact: what the demo bundle brings, the digest and diff over its
files, and the problems a bundle can have (each at its key, naming the file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mol.cli.main import main
from mol.core.errors import HCPError
from mol.hcp.changes import diff
from mol.hcp.loader import load

from .conftest import BUNDLE, hcp_text


def artifact_text(path: str, adapters: str = '[adapters.L2]\nbundles = ["demo"]\n') -> str:
    return hcp_text(f"[bundles]\npaths = [{json.dumps(path)}]\n{adapters}")


def copied(tmp_path: Path, folder: str = "a") -> Path:
    """A copy of the demo bundle (its symlink kept) with an artifact next to it."""
    root = tmp_path / folder
    shutil.copytree(BUNDLE, root / "bundle", symlinks=True)
    (root / "mol.toml").write_text(artifact_text("bundle"))
    return root


def test_the_demo_bundle_loads_with_all_its_parts(tmp_path):
    path = tmp_path / "mol.toml"
    path.write_text(artifact_text(str(BUNDLE)))
    artifact = load(path)
    bundle = artifact.bundles["demo"]
    assert bundle.manifests[".claude-plugin/plugin.json"]["x-extra"] == {"kept": True}
    # skills/greeter and mirror/greeter (a symlink to it) are one skill.
    assert bundle.skills == ["greeter"]
    assert artifact.skills["greeter"].folder == BUNDLE / "skills" / "greeter"
    assert sorted(artifact.commands) == ["demo:review", "review"]
    review = artifact.commands["review"]
    assert (review.description, review.argument_hint) == (
        "Review one file with the echo tool", "FILE [FOCUS]")
    # Claude Code's name for the bundle's tool, unchanged: mol names it the same.
    assert review.allowed_tools == ("echo", "mcp__plugin_demo_notes__add_note")
    guard, noted = bundle.hooks.PreToolUse
    assert (guard.matcher, noted.matcher) == ("echo", "mcp__plugin_demo_notes__add_note")
    assert [(h.command, h.timeout, h.on_error) for h in guard.hooks] == [
        ("python3 ./hooks/guard.py", 30, "allow")]
    server = artifact.doc.mcp_servers["plugin_demo_notes"]
    assert (server.command, server.args, server.cwd) == ("python3", ["./server.py"], str(BUNDLE))
    assert (server.env, server.env_from) == ({"NOTES_LABEL": "demo"},
                                             {"NOTES_TOKEN": "DEMO_NOTES_TOKEN"})
    l2 = artifact.doc.adapter("L2")
    assert (l2.skills, l2.mcp_servers, l2.tools.allow) == (
        ["greeter"], ["plugin_demo_notes"], ["mcp__plugin_demo_notes__*"])
    assert artifact.doc.adapter("L1").skills == []
    assert "skills" not in artifact.raw["adapters"]["L2"]  # the document as written is kept
    [warning] = artifact.warnings
    assert warning.startswith(f"{BUNDLE / 'hooks' / 'hooks.json'}: hooks.Notification: event "
                              "not supported by mol; its 1 hook(s) will not run")


def test_a_pattern_that_selects_no_tool_is_a_warning_naming_it(tmp_path):
    """Names written the old way (the plugin's bare server), Claude Code's Bash in a policy, a
    server the adapter does not use: each is a warning at load, with what was meant."""
    root = copied(tmp_path)
    command = root / "bundle" / "commands" / "review.md"
    hooks = root / "bundle" / "hooks" / "hooks.json"
    for file in (command, hooks):
        file.write_text(file.read_text().replace("mcp__plugin_demo_notes__add_note",
                                                 "mcp__notes__add_note"))
    (root / "mol.toml").write_text(artifact_text("bundle", (
        '[adapters.L1]\ntools.allow = ["echo", "Bash", "mcp__plugin_demo_notes__*"]\n'
        '[adapters.L2]\nbundles = ["demo"]\ntools.ask = ["mcp__notes__add_note"]\n'
        'tools.deny = ["mcp__plugin_demo_*__*", "mcp__*"]\n')))
    warnings = [w for w in load(root / "mol.toml").warnings if "selects no tool" in w]
    hint = ("did you mean mcp__plugin_demo_notes__...? (Claude Code names a plugin's tools "
            "mcp__plugin_<plugin>_<server>__<tool>)")
    assert warnings == [
        "adapters.L1.tools.allow: 'Bash' selects no tool: Bash is Claude Code's name; mol's "
        "tool is terminal",
        "adapters.L1.tools.allow: 'mcp__plugin_demo_notes__*' selects no tool: it names MCP "
        "server 'plugin_demo_notes', which it does not use (it has no MCP servers)",
        "adapters.L2.tools.ask: 'mcp__notes__add_note' selects no tool: it names MCP server "
        f"'notes', which it does not use (its MCP servers are plugin_demo_notes); {hint}",
        "bundle demo: hooks.PreToolUse[1].matcher: 'mcp__notes__add_note' selects no tool: it "
        f"names MCP server 'notes', which it does not use (its MCP servers are "
        f"plugin_demo_notes); {hint}",
        "command /demo:review allowed-tools: 'mcp__notes__add_note' selects no tool: it names "
        f"MCP server 'notes', which it does not use (its MCP servers are plugin_demo_notes); "
        f"{hint}"]


def test_validate_reports_what_the_bundle_holds_that_mol_does_not_run(tmp_path, capsys):
    path = tmp_path / "mol.toml"
    path.write_text(artifact_text(str(BUNDLE)))
    assert main(["hcp", "validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"{path}: valid (test) sha256:")
    assert err.startswith("warning: ") and "hooks.Notification: event not supported" in err


def test_every_file_of_the_bundle_is_in_the_digest_and_the_diff(tmp_path):
    a, b = copied(tmp_path, "a"), copied(tmp_path, "b")
    first, second = load(a / "mol.toml"), load(b / "mol.toml")
    assert first.digest == second.digest  # the bundle's location is not part of it
    command = b / "bundle" / "commands" / "review.md"
    command.write_text(command.read_text().replace("Review $1", "Read $1"))
    hooks = b / "bundle" / "hooks" / "hooks.json"
    hooks.write_text(hooks.read_text().replace('"matcher": "echo"', '"matcher": "echo|add"'))
    changed = load(b / "mol.toml")
    assert changed.digest != first.digest
    lines = [str(c) for c in diff(first, changed)]
    assert "~ bundles.paths[0]: file bundle changed" in lines
    assert "~ bundles.demo.commands.review: file command /review changed" in lines
    assert '~ bundles.demo.hooks.PreToolUse[0].matcher: "echo" -> "echo|add"' in lines
    link = b / "bundle" / "mirror" / "greeter"
    link.unlink()
    link.symlink_to("../skills")  # the same files, linked differently
    assert load(b / "mol.toml").digest != changed.digest


def test_literal_secrets_are_refused_naming_the_key(tmp_path):
    root = copied(tmp_path)
    (root / "bundle" / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "notes": {"command": "python3", "env": {"NOTES_TOKEN": "sk-123"}},
        "remote": {"type": "http", "url": "https://example.com/mcp",
                   "headers": {"Authorization": "Bearer sk-456", "X-Team": "mol"}},
    }}))
    with pytest.raises(HCPError) as caught:
        load(root / "mol.toml")
    message = str(caught.value)
    assert "bundles.paths[0]: " in message
    assert "mcpServers.notes.env.NOTES_TOKEN: a literal value for what looks like a secret" in message
    assert "mcpServers.remote.headers.Authorization: a literal credential" in message
    assert "sk-123" not in message and "sk-456" not in message


def test_references_become_mols_environment_fields(tmp_path):
    root = copied(tmp_path)
    (root / "bundle" / ".mcp.json").write_text(json.dumps({"mcpServers": {"remote": {
        "type": "http", "url": "https://example.com/mcp",
        "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}", "X-Key": "${REMOTE_KEY}",
                    "X-Team": "mol"}}}}))
    server = load(root / "mol.toml").doc.mcp_servers["plugin_demo_remote"]
    assert server.bearer_token_env_var == "REMOTE_TOKEN"
    assert (server.env_http_headers, server.http_headers) == ({"X-Key": "REMOTE_KEY"},
                                                              {"X-Team": "mol"})


@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: (r / "bundle" / "hooks" / "guard.py").unlink(),
     "hooks.PreToolUse: 'python3 ./hooks/guard.py' names ./hooks/guard.py, which is not a file"),
    (lambda r: (r / "bundle" / "hooks" / "hooks.json").write_text("{not json"),
     "hooks/hooks.json: not valid JSON"),
    (lambda r: (r / "bundle" / ".claude-plugin" / "plugin.json").write_text(
        '{"name": "demo", "skills": "../elsewhere"}'), "'../elsewhere' leads outside the bundle"),
    (lambda r: (r / "bundle" / ".claude-plugin" / "plugin.json").write_text(
        '{"name": "demo", "commands": ["./none.md"]}'), "'./none.md' does not exist"),
    (lambda r: (r / "bundle" / ".claude-plugin" / "plugin.json").write_text(
        '{"name": "demo", "skills": 5}'), "plugin.json: skills: must be a path or a list"),
    (lambda r: (r / "bundle" / ".mcp.json").write_text('{"mcpServers": {"a": {"args": "x"}}}'),
     ".mcp.json: mcpServers.a.args: must be a list"),
    (lambda r: (r / "mol.toml").write_text(artifact_text("bundle", '[adapters.L3]\nbundles = ["dmeo"]\n')),
     "adapters.L3.bundles[0]: names bundle 'dmeo', which no folder of bundles.paths provides "
     "(did you mean 'demo'?)"),
])
def test_bundle_problems_name_the_file_and_the_key(tmp_path, change, expected):
    root = copied(tmp_path)
    change(root)
    with pytest.raises(HCPError) as caught:
        load(root / "mol.toml")
    assert expected in str(caught.value)


def test_a_bundle_without_manifest_and_with_both_manifests(tmp_path):
    root = copied(tmp_path)
    shutil.rmtree(root / "bundle" / ".claude-plugin")
    (root / "mol.toml").write_text(artifact_text("bundle", '[adapters.L2]\nbundles = ["bundle"]\n'))
    assert load(root / "mol.toml").bundles["bundle"].skills == ["greeter"]
    # macaron-artifacts' layout: a Codex manifest naming a folder of symlinked skills too.
    (root / "bundle" / ".codex-plugin").mkdir()
    (root / "bundle" / ".codex-plugin" / "plugin.json").write_text(json.dumps(
        {"name": "demo", "skills": "./mirror/", "interface": {"displayName": "Demo"}}))
    (root / "mol.toml").write_text(artifact_text("bundle"))
    artifact = load(root / "mol.toml")
    assert artifact.bundles["demo"].skills == ["greeter"] and sorted(artifact.skills) == [
        "greeter", "personal-agent", "swe-workflow", "terminal-basics", "ui4a-genui"]
