"""What every benchmark prints about the machine it ran on."""

import os
import platform


def cpu_model():
    """The CPU's model name, from /proc/cpuinfo."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe():
    """"<CPU model>, <n> cores"."""
    return f"{cpu_model()}, {os.cpu_count()} cores"
