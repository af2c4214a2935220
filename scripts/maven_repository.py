"""A Maven local repository of a clone's own, seeded from the machine's (~/.m2/repository).

docs-test.py and package-test.py each build the docs' Java examples against a local repository of
their own, so that what they install there never reaches another clone's run beside. Seeded with
a copy of what the machine's repository already holds (make java-test downloaded it), such a
repository downloads only what is new, not all of Spring again on every fresh clone. This
project's own artifacts are left out: each run takes its own.
"""

import os
import shutil

MACHINES = os.path.expanduser("~/.m2/repository")
OURS = os.path.join("io", "github", "redis-ratelimit")


def seeded(folder):
    """`folder`, made a copy of the machine's repository (without this project's artifacts)
    where it does not exist yet."""
    if not os.path.isdir(folder) and os.path.isdir(MACHINES):
        ours = os.path.join(MACHINES, os.path.dirname(OURS))
        try:
            shutil.copytree(MACHINES, folder, symlinks=True,
                            ignore=lambda path, names: [os.path.basename(OURS)] if path == ours else [])
        except shutil.Error:
            pass  # a file another run's Maven moved meanwhile: this one downloads it if it needs it
    return folder
