"""CUDA's device-side library functions that PTX declares ``.extern`` and calls.

* ``vprintf(format, args)``: ``printf`` in CUDA C++ and Triton's ``tl.device_print``. The format
  string and the argument buffer are read from memory (generic addresses); each argument sits at
  the next multiple of its size (``int`` 4 bytes; ``long``, pointers, ``%s`` strings and doubles
  8: floats arrive promoted). Each calling thread's line goes to ``sys.stdout`` and to
  :attr:`LaunchStats.printed <tileopt.emulator.stats.LaunchStats.printed>`, threads in order;
  the call returns the number of arguments.
* ``__assertfail(message, file, line, function, char_size)``: a failed ``assert`` (CUDA C++,
  Triton's ``tl.device_assert`` with ``debug=True``) stops the launch with a
  :class:`~tileopt.emulator.errors.DeviceAssertError` naming the assertion, its source line and
  the thread, as the GPU reports it.
"""

from __future__ import annotations

import re
import sys

import numpy as np

from tileopt.emulator.errors import DeviceAssertError
from tileopt.emulator.memops import read_elems, resolve

#: name -> (parameter sizes in bytes, return value size or 0)
SIGNATURES = {"vprintf": ((8, 8), 4), "__assertfail": ((8, 8, 4, 8, 8), 0)}

_MAX_STRING = 1 << 16
# %[flags][width][.precision][length]conversion
_CONVERSION = re.compile(
    r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXcspfFeEgGaA%])"
)


def _read(st, ins, tid: int, addr: int, size: int) -> bytes:
    """``size`` bytes at generic address ``addr`` as thread ``tid`` reads them (bounds-checked)."""
    tids = np.array([tid])
    parts = resolve(st, ins, tids, "generic", np.array([addr], np.int64), size)
    return b"".join(v.tobytes() for v in read_elems(parts, 1, 1, size, np.uint8))


def _string(st, ins, tid: int, addr: int) -> str:
    """The NUL-terminated string at ``addr`` (``(null)`` for a null pointer)."""
    if addr == 0:
        return "(null)"
    out = bytearray()
    while len(out) < _MAX_STRING:
        byte = _read(st, ins, tid, addr + len(out), 1)
        if byte == b"\0":
            break
        out += byte
    return out.decode("utf-8", "replace")


def _format(st, ins, tid: int, fmt: str, args: int) -> tuple[str, int]:
    """printf's output for one thread, and the number of arguments it read."""
    offset = 0
    count = 0

    def next_arg(size: int) -> bytes:
        nonlocal offset, count
        offset = -(-offset // size) * size
        raw = _read(st, ins, tid, args + offset, size)
        offset += size
        count += 1
        return raw

    def convert(m: re.Match[str]) -> str:
        flags, width, precision, length, conv = m.groups()
        if conv == "%":
            return "%"
        if width == "*":
            width = str(int.from_bytes(next_arg(4), "little", signed=True))
        if precision == "*":
            precision = str(int.from_bytes(next_arg(4), "little", signed=True))
        spec = "%" + flags + (width or "") + (f".{precision}" if precision is not None else "")
        if conv in "fFeEgGaA":
            value = float(np.frombuffer(next_arg(8), np.float64)[0])
            if conv in "aA":
                text = value.hex()
                return (spec + "s") % (text.upper() if conv == "A" else text)
            return (spec + conv) % value
        if conv == "s":
            return (spec + "s") % _string(st, ins, tid, int.from_bytes(next_arg(8), "little"))
        if conv == "p":
            return (spec + "s") % hex(int.from_bytes(next_arg(8), "little"))
        size = 8 if length in ("l", "ll", "j", "z", "t") else 4
        value = int.from_bytes(next_arg(size), "little", signed=conv in "di")
        bits = {"hh": 8, "h": 16}.get(length or "", size * 8)
        value &= (1 << bits) - 1
        if conv in "di" and value >= 1 << (bits - 1):
            value -= 1 << bits
        if conv == "c":
            return (spec + "c") % chr(value & 0xFF)
        return (spec + {"u": "d", "i": "d"}.get(conv, conv)) % value

    return _CONVERSION.sub(convert, fmt), count


def vprintf(st, ins, tids: np.ndarray, params: list[np.ndarray]) -> np.ndarray:
    """Prints each thread's line; returns the number of arguments each read."""
    counts = np.zeros(tids.shape[0], np.uint32)
    for k, tid in enumerate(tids):
        fmt = _string(st, ins, int(tid), int(params[0][k]))
        text, counts[k] = _format(st, ins, int(tid), fmt, int(params[1][k]))
        st.stats.printed.append(text)
        sys.stdout.write(text)
    return counts


def assertfail(st, ins, tids: np.ndarray, params: list[np.ndarray]) -> None:
    """Raises DeviceAssertError for the first thread that called it."""
    tid = int(tids[0])
    message = _string(st, ins, tid, int(params[0][0]))
    file = _string(st, ins, tid, int(params[1][0]))
    function = _string(st, ins, tid, int(params[3][0]))
    cta, thread = st.describe_thread(tid)
    raise DeviceAssertError(
        f"kernel {st.kernel_name!r}: device-side assertion `{message}` failed at "
        f"{file}:{int(params[2][0])} in {function} (CTA {cta}, thread {thread}; PTX line "
        f"{ins.line})"
    )


FUNCTIONS = {"vprintf": vprintf, "__assertfail": assertfail}
