"""Skill scripts copied into a real Docker sandbox's workspace, and run there."""

from __future__ import annotations

import anyio
import pytest

from mol.core.tools import Resources, ToolContext
from mol.hcp.loader import load
from mol.plugins.builtin.sandbox import session_sandbox
from mol.plugins.builtin.skills import read_skill_file

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_a_skill_script_is_copied_into_the_workspace_and_runs(tmp_path, make_artifact,
                                                                    make_skill):
    make_skill(tmp_path / "skills", "kit", files={"references/a b.md": "spaces too\n"})
    artifact = load(make_artifact(tmp_path, {"L2": ["terminal-basics", "kit"]},
                                  paths=["skills"]))
    async with Resources() as resources:
        context = ToolContext(adapter="L2", session_id="skills-test", artifact=artifact,
                              resources=resources)
        with anyio.fail_after(120):
            copied = await read_skill_file("terminal-basics", "scripts", context,
                                           to_workspace=True)
            assert not copied.is_error, copied.content
            where = copied.data["written"]
            assert len(where) == 1 and where[0].endswith(
                "/.mol-skills/terminal-basics/scripts/capped.sh")
            assert f"- {where[0]} (executable)\n" in copied.content

            sandbox = await session_sandbox(context)
            result = await sandbox.run(
                ".mol-skills/terminal-basics/scripts/capped.sh -n 2 -- seq 1 100")
            assert result.exit_code == 0
            output = result.render()
            assert "1\n2\n... [96 lines omitted; full output in /tmp/capped." in output
            assert "99\n100\ncapped.sh: exit 0\n[exit code: 0]" in output

            whole = await read_skill_file("kit", ".", context, to_workspace=True)
            assert [w.split("/.mol-skills/")[1] for w in whole.data["written"]] == [
                "kit/SKILL.md", "kit/references/a b.md"]
            shown = await sandbox.run("cat '.mol-skills/kit/references/a b.md'")
            assert "spaces too" in shown.render()

            refused = await read_skill_file("kit", "../terminal-basics", context,
                                            to_workspace=True)
            assert refused.is_error and "contains '..'" in refused.content
