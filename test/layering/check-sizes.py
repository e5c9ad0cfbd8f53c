"""Checks the tree's size limits: no source file in lib/, runtime/,
dialects/ or tools/ over 700 lines, and no function of the lowerings
(lib/Conversion: the kernel wing and the CPU loops) over 150 lines,
lambdas counted in the function that holds them.

  python3 test/layering/check-sizes.py [ROOT] [--list N]

Prints what breaks a limit and exits 1 if anything does; with --list,
also the N longest functions of the kernel wing. Functions are found by
brace structure (comments and literals removed): a brace that opens in
namespace or class scope after a parenthesized header starts one; braces
of a constructor's member initializers (`: a(x), b{y} {`) do not.
"""
import pathlib
import re
import sys

FILE_LIMIT = 700
FUNCTION_LIMIT = 150
FILE_ROOTS = ["lib", "runtime", "dialects", "tools"]
FUNCTION_ROOTS = ["lib/Conversion"]
SOURCES = (".cpp", ".h", ".c", ".py")


def strip(text):
    """Comments and string/char literals blanked, newlines kept."""
    pattern = re.compile(
        r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def functions(path):
    """(name, first line, line count) of each function defined in `path`."""
    text = strip(path.read_text())
    stack = []  # (kind, header start line, name)
    header_start, header = 0, ""
    line = 1
    found = []
    for ch in text:
        if ch == "\n":
            line += 1
        if ch == "{":
            enclosing = stack[-1][0] if stack else "namespace"
            h = header.strip()
            kind = "block"
            name = ""
            if enclosing in ("namespace", "class"):
                if re.search(r"[\w>]$", h) and ")" in h and not re.search(
                        r"\b(const|override|noexcept|final|mutable)$", h):
                    # A brace initializer inside a header (a member
                    # initializer, a default argument): the header goes on.
                    kind = "init"
                elif re.match(r"(namespace\b|extern\s)", h):
                    kind = "namespace"
                elif re.search(r"\b(class|struct|union|enum)\b", h) and ")" not in h:
                    kind = "class"
                elif ")" in h and not re.search(r"=\s*$", h):
                    kind = "function"
                    m = re.search(r"([~\w:]+)\s*\(", h)
                    name = m.group(1) if m else h[:40]
            stack.append((kind, header_start, name, header))
            if kind != "init":
                header, header_start = "", line
        elif ch == "}":
            if stack:
                kind, start, name, saved = stack.pop()
                if kind == "function":
                    found.append((name, start, line - start + 1))
                if kind == "init":
                    header, header_start = saved + "{}", start
                    continue
            header, header_start = "", line
        elif ch == ";":
            header, header_start = "", line
        else:
            if not header.strip():
                header_start = line
            header += ch
    return found


def main():
    args = sys.argv[1:]
    listing = 0
    if "--list" in args:
        i = args.index("--list")
        listing = int(args[i + 1])
        del args[i:i + 2]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).parents[2])
    failures = []
    for top in FILE_ROOTS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix in SOURCES and path.is_file():
                count = len(path.read_text().splitlines())
                if count > FILE_LIMIT:
                    failures.append(f"{path.relative_to(root)}: {count} lines "
                                    f"(limit {FILE_LIMIT})")
    everything = []
    for top in FUNCTION_ROOTS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix in (".cpp", ".h"):
                for name, start, count in functions(path):
                    everything.append((count, f"{path.relative_to(root)}:{start}", name))
                    if count > FUNCTION_LIMIT:
                        failures.append(f"{path.relative_to(root)}:{start}: {name} "
                                        f"is {count} lines (limit {FUNCTION_LIMIT})")
    for count, where, name in sorted(everything, reverse=True)[:listing]:
        print(f"{count:5d}  {where}  {name}")
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
