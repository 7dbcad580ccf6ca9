"""Checks that a release binary's code layout still follows link/hot-code.ld.

Usage: check_layout.py BINARY [SCRIPT]. Fails, saying to run `sudo
hack/profile-hot-code` again, when the script has gone stale:

- when an entry of SCRIPT matches none of BINARY's functions (read from its
  symbol table, so BINARY must be unstripped). Every entry matched a function
  when the script was written; one that matches none names a function the
  code has since renamed or renumbered (a closure added before it, say), so
  the function, which ran, now sits among the cold code. Each such function
  costs every process up to 64 KiB of resident code, a small one as much as
  a large one: the kernel maps a faulting page's neighbours too. Measured by hand on
  2026-11-27: 13 such entries, none over 500 bytes, were 0.45 MiB more
  resident code in a sidecar on an empty namespace;
- when BINARY's .text.hot section holds under 85 % of the MiB of code
  SCRIPT's header says its functions took (a change of dependency or
  compiler that moved much code at once).
"""

import bisect
import re
import subprocess
import sys

from elf_functions import functions

THRESHOLD = 0.85


def section_size(binary, name):
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == name:
            return int(fields[5], 16)
    return 0


def listed_mib(script):
    with open(script) as f:
        header = f.read(2000)
    match = re.search(r"([\d.]+) of [\d.]+ MiB", header.replace("\n *", ""))
    if not match:
        sys.exit(f"{script}: its header gives no size of the listed code")
    return float(match.group(1))


def entries(script):
    """The symbol (or pattern, `*` for any text) each entry of SCRIPT names."""
    with open(script) as f:
        return re.findall(r"\*\(\.text\.(\S+) \.text\.unlikely\.\S+\)", f.read())


def unmatched(names, symbols):
    """The entries in NAMES that match none of SYMBOLS."""
    ordered = sorted(symbols)
    present = set(symbols)
    missing = []
    for name in names:
        if "*" not in name:
            if name not in present:
                missing.append(name)
            continue
        # Only the symbols that begin with the pattern's text before its
        # first `*` can match it.
        prefix = name.split("*", 1)[0]
        pattern = re.compile(re.escape(name).replace(r"\*", ".*") + "$")
        start = bisect.bisect_left(ordered, prefix)
        for symbol in ordered[start:]:
            if not symbol.startswith(prefix):
                missing.append(name)
                break
            if pattern.match(symbol):
                break
        else:
            missing.append(name)
    return missing


def main():
    binary = sys.argv[1]
    script = sys.argv[2] if len(sys.argv) > 2 else "link/hot-code.ld"
    rerun = "the list is stale; run `sudo hack/profile-hot-code`"
    symbols = [function.symbol for function in functions(binary)]
    if not symbols:
        sys.exit(f"{binary} has no symbol table (stripped?): check the unstripped build")
    listed = entries(script)
    missing = unmatched(listed, symbols)
    if missing:
        shown = "\n  ".join(missing[:10]) + ("\n  ..." if len(missing) > 10 else "")
        sys.exit(f"{len(missing)} of the {len(listed)} entries of {script} match no function of {binary}, "
                 f"so the functions they named sit among the cold code: {rerun}\n  {shown}")
    hot_mib = section_size(binary, ".text.hot") / 2**20
    wanted = listed_mib(script)
    share = hot_mib / wanted
    verdict = (f"each of the {len(listed)} entries matches a function; .text.hot holds {hot_mib:.2f} MiB, "
               f"{share:.0%} of the {wanted:.2f} MiB {script} listed")
    if share < THRESHOLD:
        sys.exit(f"{verdict}: under {THRESHOLD:.0%}, so {rerun}")
    print(verdict)


if __name__ == "__main__":
    main()
