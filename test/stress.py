#!/usr/bin/env python3
"""Stress worker for test/robustness.test.ts: random file operations for a bounded time, each
applied to a cpfs mount and to a plain directory (the model) the same way; any difference in
the outcome (success, or which errno) is reported and ends the worker with status 1.

  stress.py work  MOUNT_DIR MODEL_DIR SEED SECONDS
  stress.py check MOUNT_DIR MODEL_DIR          compare the two trees (sparse-aware)

Offsets and sizes include huge ones (sparse files of terabytes, and beyond the 16 TiB limit),
so the daemon's work and memory must not depend on them."""
import errno
import os
import random
import sys
import time

TIB = 1 << 40
OFFSETS = [0, 1, 4095, 65536, 65537, 1 << 20, 1 << 30, 5 * TIB, 15 * TIB, 20 * TIB]
SIZES = [0, 1, 100, 65535, 65536, 1 << 20, 100 << 30, 3 * TIB, 15 * TIB, 20 * TIB]


def outcome(fn):
    try:
        fn()
        return 'ok'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def listing(root):
    out = []
    for base, dirs, files in os.walk(root):
        rel = os.path.relpath(base, root)
        for name in dirs + files:
            out.append(os.path.normpath(os.path.join(rel, name)))
    return out


def work(mount, model, seed, seconds):
    rnd = random.Random(seed)
    deadline = time.time() + seconds
    n = 0
    count = 0
    while time.time() < deadline:
        names = listing(model)
        files = [p for p in names if os.path.isfile(os.path.join(model, p)) and not os.path.islink(os.path.join(model, p))]
        dirs = ['.'] + [p for p in names if os.path.isdir(os.path.join(model, p)) and not os.path.islink(os.path.join(model, p))]
        anyp = names or ['nothing']
        fresh = os.path.join(rnd.choice(dirs), 'n%d' % n)
        n += 1
        r = rnd.random()
        data = rnd.randbytes(rnd.choice([1, 50, 5000, 70000]))
        if r < 0.15 or not files:
            op = ('create', fresh)
            def run(root, p=fresh, d=data):
                with open(os.path.join(root, p), 'wb') as f:
                    f.write(d)
        elif r < 0.32:
            f_, off = rnd.choice(files), rnd.choice(OFFSETS)
            op = ('pwrite', f_, off)
            def run(root, p=f_, o=off, d=data):
                fd = os.open(os.path.join(root, p), os.O_WRONLY)
                try:
                    os.pwrite(fd, d, o)
                finally:
                    os.close(fd)
        elif r < 0.45:
            f_, size = rnd.choice(files), rnd.choice(SIZES)
            op = ('truncate', f_, size)
            def run(root, p=f_, s=size):
                os.truncate(os.path.join(root, p), s)
        elif r < 0.55:
            src, dst = rnd.choice(anyp), (rnd.choice(files) if files and rnd.random() < 0.3 else fresh)
            op = ('rename', src, dst)
            def run(root, a=src, b=dst):
                os.rename(os.path.join(root, a), os.path.join(root, b))
        elif r < 0.63:
            p = rnd.choice(anyp)
            op = ('unlink', p)
            def run(root, p=p):
                os.unlink(os.path.join(root, p))
        elif r < 0.71:
            op = ('mkdir', fresh)
            def run(root, p=fresh):
                os.mkdir(os.path.join(root, p))
        elif r < 0.77:
            p = rnd.choice(dirs)
            op = ('rmdir', p)
            def run(root, p=p):
                os.rmdir(os.path.join(root, p))
        elif r < 0.85:
            p, mode = rnd.choice(anyp), rnd.choice([0o644, 0o600, 0o755, 0o700, 0o444])
            op = ('chmod', p, oct(mode))
            def run(root, p=p, m=mode):
                if not os.path.islink(os.path.join(root, p)):
                    os.chmod(os.path.join(root, p), m)
        elif r < 0.93:
            p = rnd.choice(anyp)
            times = (rnd.randrange(0, 4_000_000_000) * 1_000_000_000 + rnd.randrange(1_000_000_000),
                     rnd.randrange(0, 4_000_000_000) * 1_000_000_000 + rnd.randrange(1_000_000_000))
            op = ('utime', p, times)
            def run(root, p=p, t=times):
                os.utime(os.path.join(root, p), ns=t, follow_symlinks=False)
                # The times are exact, to the nanosecond, on both sides.
                st = os.lstat(os.path.join(root, p))
                if (st.st_atime_ns, st.st_mtime_ns) != t:
                    raise OSError(errno.EBADMSG, 'times read back as %r, not %r' % ((st.st_atime_ns, st.st_mtime_ns), t))
        else:
            target = rnd.choice(anyp + ['../elsewhere'])
            op = ('symlink', fresh, target)
            def run(root, p=fresh, t=target):
                os.symlink(t, os.path.join(root, p))
        want = outcome(lambda: run(model))
        got = outcome(lambda: run(mount))
        count += 1
        if want != got:
            print('MISMATCH after %d ops: %r gave %s in the mount and %s on disk' % (count, op, got, want), flush=True)
            return 1
    print('OK %d ops' % count, flush=True)
    return 0


def data_ranges(path, size):
    """Where a file may hold data: its SEEK_DATA extents (holes read as zeros)."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, end))
            pos = end
    finally:
        os.close(fd)
    return out


def same_content(a, b, size):
    ranges = sorted(data_ranges(a, size) + data_ranges(b, size))
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_RDONLY)
    try:
        for start, end in ranges:
            pos = start
            while pos < end:
                n = min(1 << 20, end - pos)
                if os.pread(fa, n, pos) != os.pread(fb, n, pos):
                    return False
                pos += n
    finally:
        os.close(fa)
        os.close(fb)
    return True


def check(mount, model):
    a, b = sorted(listing(mount)), sorted(listing(model))
    if a != b:
        print('DIFFERENT PATHS: only in the mount %s, only on disk %s' % (sorted(set(a) - set(b))[:10], sorted(set(b) - set(a))[:10]))
        return 1
    for p in a:
        pa, pb = os.path.join(mount, p), os.path.join(model, p)
        sa, sb = os.lstat(pa), os.lstat(pb)
        if sa.st_mode != sb.st_mode:
            print('MODE %s: %o in the mount, %o on disk' % (p, sa.st_mode, sb.st_mode))
            return 1
        if os.path.islink(pb):
            if os.readlink(pa) != os.readlink(pb):
                print('TARGET %s' % p)
                return 1
        elif os.path.isfile(pb):
            if sa.st_size != sb.st_size:
                print('SIZE %s: %d in the mount, %d on disk' % (p, sa.st_size, sb.st_size))
                return 1
            if not same_content(pa, pb, sb.st_size):
                print('CONTENT %s' % p)
                return 1
    print('SAME %d paths' % len(a))
    return 0


if __name__ == '__main__':
    if sys.argv[1] == 'work':
        sys.exit(work(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
    sys.exit(check(sys.argv[2], sys.argv[3]))
