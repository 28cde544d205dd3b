#!/usr/bin/env python3
"""Checks that a library from `masformer-compile --target=cuda` embeds
cubins for the expected chip.

    check_library.py model.so --chip sm_90

finds every ELF image inside the library (the host library is one itself;
the embedded ones start past its header), keeps those for NVIDIA GPUs
(e_machine 190, EM_CUDA), reads the chip from e_flags (bits 8-15 in the
ELF ABI version 8 that CUDA 12 and later write; bits 0-7 before) and
prints "<n> cubin(s) for sm_XY". Exit status 1 when there is none, or one is
for another chip.
"""
import argparse
import struct
import sys

EM_CUDA = 190


def cubins(data):
    """(offset, sm) of each embedded CUDA ELF image."""
    out, i = [], 1
    while True:
        i = data.find(b'\x7fELF', i)
        if i < 0 or i + 52 > len(data):
            return out
        machine = struct.unpack_from('<H', data, i + 18)[0]
        if data[i + 4] == 2 and machine == EM_CUDA:  # ELFCLASS64
            flags = struct.unpack_from('<I', data, i + 48)[0]
            abi_version = data[i + 8]
            sm = (flags >> 8) & 0xFF if abi_version >= 8 else flags & 0xFF
            out.append((i, sm))
        i += 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('library')
    ap.add_argument('--chip', required=True, help='sm_XY')
    a = ap.parse_args()
    want = int(a.chip.removeprefix('sm_').rstrip('a'))
    with open(a.library, 'rb') as f:
        found = cubins(f.read())
    if not found:
        print('%s: no cubin embedded' % a.library)
        return 1
    other = sorted({sm for _, sm in found if sm != want})
    if other:
        print('%s: cubins for %s, expected sm_%d' % (
            a.library, ', '.join('sm_%d' % s for s in other), want))
        return 1
    print('%d cubin%s for sm_%d' % (len(found), '' if len(found) == 1
                                     else 's', want))
    return 0


if __name__ == '__main__':
    sys.exit(main())
