#!/usr/bin/env python3
# Run a command on a pseudo-terminal (stdin, stdout and stderr all on it, 200 columns) and
# print, as JSON, its exit code and everything it wrote, in the pieces the terminal got
# them, each with the seconds since the start: a test sees what a user's terminal shows,
# and when.
#   pty-run.py CMD ARGS...
import fcntl, json, os, pty, struct, subprocess, sys, termios, time

master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 50, 200, 0, 0))
start = time.monotonic()
proc = subprocess.Popen(sys.argv[1:], stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
os.close(slave)
pieces = []
while True:
    try:
        data = os.read(master, 65536)
    except OSError:  # EIO: every writer closed the terminal
        break
    if not data:
        break
    pieces.append([round(time.monotonic() - start, 3), data.decode('utf-8', 'replace')])
code = proc.wait()
print(json.dumps({'code': code, 'pieces': pieces}))
