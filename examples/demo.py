"""`make demo`: a row softmax from Python to PTX, run in the PTX emulator.

1. builds the kernel (tileopt.kernels.softmax, written with tileopt.builder) and prints
   its tile IR;
2. runs `tileopt-opt --tile-assign-layouts` on it (the layouts the GPU gets);
3. compiles it for sm_90 and prints the PTX summary (registers, instructions);
4. runs the PTX in tileopt's emulator on a 64 x 1000 input and checks it
   against torch.softmax; prints the emulator's memory counters.
"""

from __future__ import annotations

import subprocess
import sys

import tileopt
import torch
from tileopt import kernels
from tileopt._tools import tool_path


def main() -> int:
    kb = kernels.softmax(block=1024)
    print("// ---- 1. row softmax, built from Python ----")
    print(kb.module)

    opt = subprocess.run(
        [str(tool_path("tileopt-opt")), "--tile-assign-layouts", "--canonicalize"],
        input=str(kb.module),
        capture_output=True,
        text=True,
        check=False,
    )
    if opt.returncode != 0:
        print(opt.stderr, file=sys.stderr)
        return opt.returncode
    print("// ---- 2. tileopt-opt --tile-assign-layouts: the layouts ----")
    print("\n".join(line for line in opt.stdout.splitlines() if line.startswith("#")))

    # aligned=True: torch's tensors are 16-byte aligned (the launcher checks), so the
    # kernel needs no run-time alignment check (Triton's divisibility hint).
    kernel = tileopt.compile(kb, target="sm_90", num_warps=4, aligned=True)
    print("\n---- 3. compiled for sm_90 ----")
    print(kernel.summary())

    rows, cols = 64, 1000
    x = torch.randn(rows, cols)
    y = torch.empty_like(x)
    stats = kernel.launch((rows,), x, y, device="emulator")
    error = (y - torch.softmax(x, dim=1)).abs().max().item()
    minimum = 2 * rows * cols * 4 // 32
    sectors = stats.global_load_sectors + stats.global_store_sectors
    print(f"\n---- 4. emulator, {rows} x {cols} ----")
    print(f"  max |tileopt - torch.softmax| = {error:.2e}")
    print(f"  warp-instructions {stats.instructions}, global sectors {sectors} "
          f"({sectors / minimum:.2f}x the minimum {minimum})")
    if error > 1e-6:
        print("  MISMATCH against PyTorch", file=sys.stderr)
        return 1
    print("  matches PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
