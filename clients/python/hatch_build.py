"""Puts the Functions library (the repository's functions/ratelimit.lua, its one source) into the
package: into the sdist, which then carries it, and into the wheel, built from the repository or
from that sdist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

IN_REPOSITORY = Path("..", "..", "functions", "ratelimit.lua")
IN_SDIST = Path("src", "redis_ratelimit_client", "ratelimit.lua")


class LibraryHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        source = next((p for p in (root / IN_REPOSITORY, root / IN_SDIST) if p.is_file()), None)
        if source is None:
            raise FileNotFoundError(f"the Functions library: neither {IN_REPOSITORY} nor {IN_SDIST}")
        inside = str(IN_SDIST) if self.target_name == "sdist" else "redis_ratelimit_client/ratelimit.lua"
        build_data["force_include"][str(source.resolve())] = inside
