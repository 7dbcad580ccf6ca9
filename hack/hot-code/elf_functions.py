"""The functions an ELF binary defines, read from its symbol table."""

import subprocess
from typing import NamedTuple


class Function(NamedTuple):
    symbol: str
    address: int
    size: int
    offset: int  # in the file


def load_segments(binary):
    """(address, size in memory, file offset) of each LOAD segment."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True).stdout
    return [(int(f[2], 16), int(f[5], 16), int(f[1], 16)) for f in (line.split() for line in out.splitlines())
            if f[:1] == ["LOAD"]]


def functions(binary):
    """Every defined symbol of type FUNC with a size. Only those: the
    assembly in the crypto crates labels constant tables and branch targets
    inside .text too (NOTYPE and OBJECT symbols), and a probe there would
    patch data or split an instruction."""
    segments = load_segments(binary)
    out = subprocess.run(["readelf", "-sW", binary], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        fields = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(fields) != 8 or fields[3] != "FUNC" or fields[6] == "UND":
            continue
        address, size = int(fields[1], 16), int(fields[2], 0)
        if size == 0:
            continue
        for start, length, offset in segments:
            if start <= address < start + length:
                found[fields[7]] = Function(fields[7], address, size, address - start + offset)
    return list(found.values())
