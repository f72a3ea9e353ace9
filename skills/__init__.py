"""Agent Skills (``SKILL.md`` folders): the built-in set and their loader."""
