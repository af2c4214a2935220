"""The package under test is the installed wheel, complete: not the source tree."""

from __future__ import annotations

import sys
from importlib import metadata, resources
from pathlib import Path

import redis_ratelimit_client


def test_imported_from_the_installed_wheel() -> None:
    source_tree = Path(__file__).resolve().parents[1] / "src"
    location = Path(redis_ratelimit_client.__file__).resolve()
    assert not location.is_relative_to(source_tree), f"imported from the source tree: {location}"
    assert location.is_relative_to(Path(sys.prefix).resolve()), f"not installed in this environment: {location}"
    assert metadata.version("redis-ratelimit-client") == redis_ratelimit_client.__version__


def test_the_wheel_carries_the_library_and_its_types() -> None:
    package = resources.files("redis_ratelimit_client")
    assert package.joinpath("ratelimit.lua").read_text(encoding="utf-8").startswith("#!lua name=ratelimit")
    assert package.joinpath("py.typed").is_file()
