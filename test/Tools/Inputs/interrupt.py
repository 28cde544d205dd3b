#!/usr/bin/env python3
"""Interrupts a tool (SIGINT, as Ctrl-C does) once it has created the
temporary file it writes its output to, and checks that it exits with a
non-zero status and leaves no temporary file behind, neither beside the
output nor in TMPDIR.

  interrupt.py OUT_DIR TMP_DIR TOOL ARGS...
"""

import os
import shutil
import signal
import subprocess
import sys
import time


def leftovers(out_dir, tmp_dir):
    return ([f for f in os.listdir(out_dir) if ".tmp-" in f] +
            [f for f in os.listdir(tmp_dir) if f.startswith("masformer")])


def main():
    out_dir, tmp_dir, tool, args = (sys.argv[1], sys.argv[2], sys.argv[3],
                                    sys.argv[4:])
    env = dict(os.environ, TMPDIR=tmp_dir)
    # A shell (or lit) may start us with SIGINT ignored, and the tool would
    # inherit that: give it the default, as a terminal's Ctrl-C finds it.
    p = subprocess.Popen(
        [shutil.which(tool)] + args, env=env, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not leftovers(out_dir, tmp_dir):
        if p.poll() is not None or time.time() > deadline:
            sys.exit("the tool ended (status %s) before it wrote a temporary "
                     "file" % p.returncode)
        time.sleep(0.005)
    seen = leftovers(out_dir, tmp_dir)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=120)
    left = leftovers(out_dir, tmp_dir)
    print("interrupted with %s present: status %d, left %s" %
          (sorted(seen)[0].split(".tmp-")[0] if seen else "-", p.returncode,
           left or "nothing"))
    return 1 if left or p.returncode == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
