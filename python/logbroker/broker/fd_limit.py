"""The open files limit (RLIMIT_NOFILE) of the broker process.

A partition being written or read holds file descriptors: its active segment's `.log`,
plus for a while the `.log` of up to two older segments a consumer reads; an idle partition
holds none once the flush scheduler's sweep (every `log.flush.scheduler.interval.ms`) found
it idle (the engine's policy: rust/src/log.rs, "File descriptors"). Every client connection
holds a socket. A distribution's default soft limit (often 1,024) is far below what a
broker with thousands of busy partitions needs, while the hard limit is usually much
higher, and an unprivileged process may raise its soft limit up to the hard one. `raise_open_files_limit` does that once
at startup. When descriptors run out anyway, the engine reports "too many open files (raise
the open files limit, RLIMIT_NOFILE)" naming the partition and the file; the hard limit is
then the operator's to raise (systemd `LimitNOFILE=`, `ulimit -Hn`, limits.conf).
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("logbroker.fd_limit")

# With an unlimited hard limit, Linux still caps RLIMIT_NOFILE at fs.nr_open.
_NR_OPEN = "/proc/sys/fs/nr_open"
_FALLBACK_CEILING = 1 << 20


def _ceiling(hard: int) -> int:
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        with open(_NR_OPEN, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return _FALLBACK_CEILING


def raise_open_files_limit() -> tuple[int, int]:
    """Raises the soft RLIMIT_NOFILE to the hard limit. Returns (old soft, new soft); the two
    are equal when nothing changed (already at the hard limit, or the system refused, which
    is logged as a warning). Logs the change at INFO."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _ceiling(hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as e:
        log.warning("could not raise the open files limit (RLIMIT_NOFILE) from %d to %d: %s", soft, target, e)
        return soft, soft
    log.info("raised the open files limit (RLIMIT_NOFILE) from %d to %d (the hard limit)", soft, target)
    return soft, target
