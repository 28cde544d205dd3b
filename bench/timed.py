"""Wall time and peak resident memory of a command, by /usr/bin/time -v."""

import re
import subprocess
import sys


def timed(cmd):
    """(stdout, wall seconds, peak RSS bytes) of `cmd`; exits on failure."""
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)",
                     r.stderr)
    h, m, s = (float(x) if x else 0.0 for x in wall.groups())
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                        r.stderr).group(1)) * 1024
    return r.stdout, h * 3600 + m * 60 + s, rss
