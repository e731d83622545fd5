# lit configuration of tileopt's IR tests (FileCheck, -verify-diagnostics).
# ruff: noqa: F821  (config and lit_config come from lit)

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "tileopt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tileopt_obj_root, "test")
# pytest owns test/python.
config.excludes = ["python", "lit.cfg.py", "CMakeLists.txt"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.tileopt_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["tileopt-opt"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# ptxas from the pinned nvidia-cuda-nvcc wheel, when installed: tests that
# check that ptxas accepts generated PTX say `REQUIRES: ptxas`.
try:
    import nvidia

    for root in nvidia.__path__:
        ptxas = os.path.join(root, "cu13", "bin", "ptxas")
        if os.path.exists(ptxas):
            config.available_features.add("ptxas")
            config.substitutions.append(("%ptxas", ptxas))
            break
except ImportError:
    pass
