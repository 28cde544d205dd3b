#!/usr/bin/env python3
"""Extracts the objects of the gpu.binary ops of an MLIR file.

    gpu_objects.py module.mlir OUTDIR

writes OUTDIR/<binary>.<chip>.ptx for objects in assembly form (format=isa)
and OUTDIR/<binary>.<chip>.cubin for binaries (format=bin), and prints one
line per file. MLIR prints the object's bytes as a string with \\XX escapes.
"""
import os
import re
import sys

_OBJECT = re.compile(
    r'gpu\.binary @(\w+)\s*(?:<[^>]*>)?\s*\[(.*?)\]\s*$', re.M)
_ENTRY = re.compile(
    r'#gpu\.object<#nvvm\.target<[^>]*chip = "(\w+)"[^>]*>,\s*'
    r'(?:properties = \{[^}]*\},\s*)?(assembly = |bin = |)"((?:[^"\\]|\\.)*)"')


def unescape(s):
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == '\\':
            nxt = s[i + 1]
            if nxt in '\\"':
                out.append(ord(nxt))
                i += 2
            else:
                out.append(int(s[i + 1:i + 3], 16))
                i += 3
        else:
            out.extend(c.encode())
            i += 1
    return bytes(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    os.makedirs(sys.argv[2], exist_ok=True)
    found = 0
    for m in _OBJECT.finditer(text):
        name, body = m.group(1), m.group(2)
        for e in _ENTRY.finditer(body):
            chip, kind, data = e.group(1), e.group(2), e.group(3)
            ext = 'ptx' if kind.startswith('assembly') else 'cubin'
            path = os.path.join(sys.argv[2], f'{name}.{chip}.{ext}')
            with open(path, 'wb') as f:
                f.write(unescape(data))
            print(path)
            found += 1
    if not found:
        sys.exit(f'{sys.argv[1]}: no gpu.binary object found')


if __name__ == '__main__':
    main()
