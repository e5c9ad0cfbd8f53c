#!/usr/bin/env python3
"""Runs ptxas on each PTX module of a file written by mla-print-ptx.

Usage: ptxas-modules.py PTXAS [ptxas arguments] FILE.ptx [-o OUT]

mla-print-ptx writes a module per kernel, each starting with a line
"// mla-print-ptx: module @<name>"; ptxas assembles one module per call. The
file is split at those lines and ptxas runs on each piece with the given
arguments (OUT, when given, becomes OUT.<index>). Its output is passed on in
order and the exit status is the first failure's, so a lit test checks the
whole file as if ptxas had taken it at once.
"""
import os
import subprocess
import sys

MARKER = "// mla-print-ptx: module @"


def split_modules(text):
    modules, current = [], None
    for line in text.splitlines(keepends=True):
        if line.startswith(MARKER):
            current = []
            modules.append(current)
        if current is None:
            sys.exit("ptxas-modules.py: no '%s' line before the PTX" % MARKER)
        current.append(line)
    return ["".join(m) for m in modules]


def main(argv):
    ptxas, args = argv[1], argv[2:]
    inputs = [i for i, a in enumerate(args) if a.endswith(".ptx")]
    if len(inputs) != 1:
        sys.exit("ptxas-modules.py: expected one .ptx input, got %d" % len(inputs))
    source = args[inputs[0]]
    with open(source) as f:
        modules = split_modules(f.read())
    if not modules:
        sys.exit("ptxas-modules.py: %s holds no PTX module" % source)
    status = 0
    for index, module in enumerate(modules):
        piece = "%s.%d.ptx" % (source, index)
        with open(piece, "w") as f:
            f.write(module)
        call = list(args)
        call[inputs[0]] = piece
        if "-o" in call:
            out = call.index("-o") + 1
            call[out] = "%s.%d" % (call[out], index)
        result = subprocess.run([ptxas] + call, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        sys.stdout.write(result.stdout)
        if result.returncode and not status:
            status = result.returncode
        os.remove(piece)
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
