# lit configuration of the mla compiler's IR tests.
import os
import sys

import lit.formats

config.name = "MLA"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mla_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in",
                   "unit", "reference", "ptxas-modules.py"]

# Tools are found in the build first, then in LLVM's tool directory.
config.environment["PATH"] = os.pathsep.join(
    [config.mla_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

# mla-print-ptx writes a PTX module per kernel into one file; %ptxas
# assembles each of them with the toolkit's ptxas.
if config.ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(
        ("%ptxas", "%s %s %s" % (sys.executable,
                                 os.path.join(config.test_source_root,
                                              "lit", "ptxas-modules.py"),
                                 config.ptxas)))
