#!/usr/bin/env python3
"""Dependencies point down: the compiler (lib/, dialects/), the runtime
(runtime/) and the public headers (include/) never use tools/ or test/.
Fails naming every include or CMake line that does."""

import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]).resolve()
# Headers that exist only above the runtime: tools/support and test/.
upper_headers = {
    p.name
    for top in ("tools", "test")
    for p in (root / top).rglob("*.h")
}
upper_targets = {"MLAToolSupport", "MLAReference", "MLAFuzzInput"}
include = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

problems = []
for top in ("lib", "runtime", "dialects", "include"):
    for path in sorted((root / top).rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(root)
        if path.suffix in (".h", ".cpp", ".c", ".inc", ".def"):
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = include.match(line)
                if not m:
                    continue
                name = m.group(1)
                beside = (path.parent / name).resolve()
                upward = any(beside.is_relative_to(root / top)
                             for top in ("tools", "test"))
                if (name.startswith(("tools/", "test/")) or upward
                        or ("/" not in name and name in upper_headers
                            and not beside.exists())):
                    problems.append(f"{rel}:{n}: includes {name}")
        elif path.name == "CMakeLists.txt" or path.suffix == ".cmake":
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if any(t in code for t in upper_targets) or re.search(
                        r"(SOURCE_DIR|source_dir)[}/]*/(tools|test)\b", code):
                    problems.append(f"{rel}:{n}: {line.strip()}")

for p in problems:
    print(p)
print(f"{len(problems)} upward dependencies")
sys.exit(1 if problems else 0)
