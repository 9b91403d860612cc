"""What the machine lets this process have: the memory it may use, whatever bounds it (the machine's
memory, the process's resource limits, its container's cgroup)."""

from __future__ import annotations

import os
from pathlib import Path

# cgroup v2's limit of a container (its cgroup namespace shows its own group at the root), and cgroup v1's.
CGROUP_MEMORY_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def process_memory() -> int | None:
    """The bytes this process may have: the least of the machine's memory, its RLIMIT_AS and RLIMIT_DATA,
    and its container's cgroup limit; None where none of them can be read (Windows). Sizing anything
    from the machine's memory alone let a process under a smaller limit allocate past it and die."""
    bounds = []
    try:
        bounds.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # no sysconf
        pass
    try:
        import resource
    except ImportError:  # Windows
        pass
    else:
        for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft, _hard = resource.getrlimit(which)
            if soft != resource.RLIM_INFINITY:
                bounds.append(soft)
    for path in CGROUP_MEMORY_FILES:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" where the group has no limit
            bounds.append(int(text))
    return min(bounds) if bounds else None
