"""Counters of one launch: the emulator's stand-in for a profiler."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LaunchStats:
    """What a launch executed and how it used memory.

    Instruction counts are per warp (``instructions``: warp-instructions issued, including
    predicated-off ones) and per thread (``thread_instructions``: warp-instructions times
    the threads of the warp that reached the instruction).  Global counters are per warp
    request; sectors are distinct 32-byte segments touched by a request's active threads.
    Unique sectors are the distinct 32-byte segments the whole launch read (or wrote): its
    DRAM traffic when the L2 cache holds the launch's working set, so that a weight every
    program reads again, or a row read in several passes, counts once.
    Shared bank conflicts are the extra wavefronts beyond one per request phase
    (32 banks x 4 bytes; 64-bit accesses in 2 phases, 128-bit in 4).
    """

    kernel: str = ""
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    instructions: int = 0
    thread_instructions: int = 0
    instructions_by_class: dict[str, int] = field(default_factory=dict)
    global_load_requests: int = 0
    global_store_requests: int = 0
    global_load_bytes: int = 0
    global_store_bytes: int = 0
    global_load_sectors: int = 0
    global_store_sectors: int = 0
    global_load_unique_sectors: int = 0
    global_store_unique_sectors: int = 0
    shared_load_requests: int = 0
    shared_store_requests: int = 0
    shared_bank_conflicts: int = 0
    shared_races: int = 0
    global_races: int = 0
    shared_uninitialized_reads: int = 0
    barriers: int = 0
    wall_time: float = 0.0
    #: what the kernel's threads printed (vprintf: CUDA's printf, Triton's tl.device_print)
    printed: list[str] = field(default_factory=list)

    @property
    def global_load_efficiency(self) -> float:
        """Requested bytes / bytes moved in 32-byte sectors (1.0 = perfectly coalesced)."""
        return (
            self.global_load_bytes / (32 * self.global_load_sectors)
            if self.global_load_sectors
            else 1.0
        )

    @property
    def global_store_efficiency(self) -> float:
        """Requested bytes / bytes moved in 32-byte sectors for stores."""
        return (
            self.global_store_bytes / (32 * self.global_store_sectors)
            if self.global_store_sectors
            else 1.0
        )

    def summary(self) -> str:
        """A multi-line human-readable summary."""
        lines = [
            f"kernel {self.kernel} grid={self.grid} block={self.block}",
            f"  instructions: {self.instructions} warp / {self.thread_instructions} thread",
            "  by class: "
            + ", ".join(f"{k}={v}" for k, v in sorted(self.instructions_by_class.items())),
            f"  global loads: {self.global_load_requests} req, {self.global_load_bytes} B, "
            f"{self.global_load_sectors} sectors (eff {self.global_load_efficiency:.2f}), "
            f"{self.global_load_unique_sectors} unique",
            f"  global stores: {self.global_store_requests} req, {self.global_store_bytes} B, "
            f"{self.global_store_sectors} sectors (eff {self.global_store_efficiency:.2f}), "
            f"{self.global_store_unique_sectors} unique",
            f"  shared bank conflicts: {self.shared_bank_conflicts}, barriers: {self.barriers}, "
            f"races: {self.shared_races}, uninitialised reads: {self.shared_uninitialized_reads}, "
            f"global races: {self.global_races}",
            f"  wall time: {self.wall_time:.3f} s"
            + (
                f", {self.thread_instructions / self.wall_time / 1e6:.1f} M thread-instr/s"
                if self.wall_time
                else ""
            ),
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
