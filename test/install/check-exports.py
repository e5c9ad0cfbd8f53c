"""Checks that a shared library exports exactly the functions a C header
declares: nothing missing (a declared function the library lacks fails at
link time in a user's program) and nothing more (LLVM, MLIR or C++ runtime
symbols leaking out would meet other copies in the same process).

    check-exports.py <libmla.so> <mla.h>
"""
import re
import subprocess
import sys


def declared_functions(header_path):
    text = open(header_path, encoding="utf-8").read()
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    code = re.sub(r"//[^\n]*", "", code)
    return set(re.findall(r"\b(mla_\w+)\s*\(", code))


def exported_functions(library_path):
    listing = subprocess.run(
        ["nm", "-D", "--defined-only", library_path],
        check=True, capture_output=True, text=True).stdout
    symbols = set()
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        name = fields[2].split("@")[0]
        # The version node itself (an absolute symbol) is not a function.
        if fields[1] == "A":
            continue
        symbols.add(name)
    return symbols


def main():
    library, header = sys.argv[1], sys.argv[2]
    declared = declared_functions(header)
    exported = exported_functions(library)
    if len(declared) < 30:
        print(f"FAIL: only {len(declared)} functions found in {header}")
        return 1
    missing = sorted(declared - exported)
    extra = sorted(exported - declared)
    for name in missing:
        print(f"FAIL: declared in the header, not exported: {name}")
    for name in extra[:50]:
        print(f"FAIL: exported, not in the header: {name}")
    if len(extra) > 50:
        print(f"... and {len(extra) - 50} more")
    if missing or extra:
        return 1
    print(f"PASS: {len(exported)} exported symbols, exactly the header's functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
