#!/usr/bin/env python3
# An untrusted agent's process, for test/untrusted.test.ts. It waits until cpfs starts writing
# the real directory (a `.cpfs-` temporary name appears in WATCH), then swaps the directory A
# with a symlink to TARGET (somewhere outside the workspace) again and again with
# renameat2(RENAME_EXCHANGE), so that any path cpfs resolves more than once may lead outside.
# Bounded: it stops by itself after SECONDS or MAX swaps, or on SIGINT, and prints its swap count.
import ctypes, os, signal, sys, time

AT_FDCWD = -100
RENAME_EXCHANGE = 2
libc = ctypes.CDLL(None, use_errno=True)

def main() -> None:
    root, a, target, watch = sys.argv[1:5]
    seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
    max_swaps = 2_000_000
    os.chdir(root)
    stop: list = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    deadline = time.monotonic() + seconds
    # Wait for the plan to start writing: its temporary files are named .cpfs-tmp-<plan>-<n>.
    while time.monotonic() < deadline and not stop:
        try:
            if any(n.startswith('.cpfs-') for n in os.listdir(watch)):
                break
        except OSError:
            pass
    swaps = 0
    ea, evil = a.encode(), b'.evil'
    while time.monotonic() < deadline and swaps < max_swaps and not stop:
        # A symlink to the target under a name of its own (made again whenever cpfs removed
        # it), swapped into A's place and back: A is the symlink half of the time.
        try:
            os.symlink(target, '.evil')
        except OSError:
            pass
        for _ in range(100):
            if libc.renameat2(AT_FDCWD, ea, AT_FDCWD, evil, RENAME_EXCHANGE) == 0:
                swaps += 1
    print(swaps, flush=True)

if __name__ == '__main__':
    main()
