"""Writes link/hot-code.ld from the functions a profiled sidecar ran.

Usage: write_script.py BINARY RAN OUT [PREVIOUS]. BINARY is the unstripped
release binary the profile ran, RAN what record_calls.py wrote (each function
that ran, after the moment it first ran). The script names them in the order
they first ran, so that code every process runs (start-up, the runtime, the
first workload's path) comes first and a process that never reaches the later
workloads' code does not map it.

That order is only as fine as record_calls.py's passes (half a second, the
functions of one pass by name), so two profiles of the same code differ:
measured on 2026-11-27, a sidecar holding 10,000 ConfigMaps kept 0.2-0.5 MiB
more code resident under a fresh list than under the one it replaced, with
nearly the same functions in both. With PREVIOUS (the list being replaced),
its order is kept: a function it named keeps its place, and one it did not
goes right after the function that first ran before it. PREVIOUS's entries
that did not run this time but still name a function of BINARY stay, at
their place: what runs on a path that depends on timing (a retry, a log
line) is not seen by every profile, and leaving it out cost the same sidecar
0.1-0.3 MiB. Each is named as a section pattern: its symbol with the
parts that change from build to build (legacy mangling's hash, v0's crate
disambiguators) as `*` where that pattern matches no function that did not
run, so the entry keeps matching after a dependency or the compiler changes;
the exact symbol where it would (the instances of one generic function share
a path and differ only in the hash). The number LLVM gives a local copy of a
function (`write_str.5782`) is always `*`: it moves with any change to the
program, and a copy left out of .text.hot costs a process up to 64 KiB of
resident code (the kernel maps the neighbours of a faulting page), even
where the copy itself is a few bytes.
"""

import re
import sys
from collections import defaultdict

from check_layout import entries as listed_entries
from check_layout import unmatched
from elf_functions import functions

HEADER = """\
/* The functions a running sidecar executes, placed together before the rest
 * of the code: build.rs passes this script to the linker in release builds.
 * Written by hack/profile-hot-code from the benchmarks' workloads; do not
 * edit by hand, run it again. {ran} functions, {ran_mib:.2f} of {all_mib:.2f} MiB
 * of code; {stable} patterns without the build's hashes, {exact} exact symbols
 * ({numbered} entries with LLVM's copy number as `*`). */
"""


# The suffix LLVM gives a local copy of a function: `.1234` or `.llvm.1234`.
COPY_NUMBER = re.compile(r"(\.llvm)?\.\d+$")


def split_copy_number(symbol):
    """(the symbol without LLVM's copy number, `.*` where it had one, else "")."""
    number = COPY_NUMBER.search(symbol)
    return (symbol[:number.start()], ".*") if number else (symbol, "")


def stable_pattern(symbol):
    """The symbol with its build-specific parts as `*`."""
    base, copy = split_copy_number(symbol)
    if base.startswith("_ZN"):
        base = re.sub(r"17h[0-9a-f]{16}E$", "17h*E", base)
    elif base.startswith("_R"):
        base = re.sub(r"Cs[0-9A-Za-z]+_(?=\d)", "Cs*_", base)
    return base + copy


def exact_pattern(symbol):
    """The symbol itself, but for LLVM's copy number as `*`."""
    base, copy = split_copy_number(symbol)
    return base + copy


def previous_order(path):
    """Each entry of the list at PATH (its copy numbers as `*`), by place."""
    if path is None:
        return {}
    order = {}
    for place, name in enumerate(listed_entries(path)):
        order.setdefault(exact_pattern(name), place)
    return order


def keeping_order(entries, previous, kept):
    """ENTRIES (in the order they first ran) and KEPT (entries of PREVIOUS
    that did not run) in PREVIOUS's order: each entry PREVIOUS has at its
    place there, each other one after the entry that first ran just before it."""
    if not previous:
        return list(entries)
    place = -1
    keyed = [((previous[entry], False, -1), entry) for entry in kept]
    for at, entry in enumerate(entries):
        place = previous.get(entry, place)
        keyed.append(((place, entry not in previous, at), entry))
    return [entry for _, entry in sorted(keyed)]


def main():
    binary, ran_file, out = sys.argv[1:4]
    previous = previous_order(sys.argv[4] if len(sys.argv) > 4 else None)
    sizes = {function.symbol: function.size for function in functions(binary)}
    first_seen = {}
    with open(ran_file) as f:
        for line in f:
            seen, symbol = line.split()
            if symbol in sizes:
                first_seen[symbol] = int(seen)
    ran = set(first_seen)
    # Which functions each stable pattern would match (a pattern is its
    # symbols with their hashes as `*`, so it matches exactly those).
    matched = defaultdict(set)
    for symbol in sizes:
        matched[stable_pattern(symbol)].add(symbol)
    # In the order each entry's first function first ran.
    entries = dict.fromkeys(
        stable_pattern(symbol) if matched[stable_pattern(symbol)] <= ran else exact_pattern(symbol)
        for symbol in sorted(ran, key=lambda s: (first_seen[s], s)))
    in_place = sum(entry in previous for entry in entries)
    not_run = [entry for entry in previous if entry not in entries]
    gone = set(unmatched(not_run, list(sizes)))
    kept = [entry for entry in not_run if entry not in gone]
    entries = keeping_order(entries, previous, kept)
    exact = sum(entry not in matched for entry in entries)
    numbered = sum(entry.endswith(".*") for entry in entries)
    ran_bytes = sum(sizes[s] for s in ran)
    all_bytes = sum(sizes.values())
    with open(out, "w") as f:
        f.write(HEADER.format(ran=len(ran), ran_mib=ran_bytes / 2**20, all_mib=all_bytes / 2**20,
                              stable=len(entries) - exact, exact=exact, numbered=numbered))
        f.write("SECTIONS\n{\n  .text.hot : {\n")
        # LLVM puts a #[cold] function (RawVec's growth, hash tables'
        # rehash) in .text.unlikely.<symbol>; some of them run everywhere.
        f.writelines(f"    *(.text.{entry} .text.unlikely.{entry})\n" for entry in entries)
        f.write("  }\n}\nINSERT BEFORE .text;\n")
    order = (f"; {in_place + len(kept)} of {len(entries)} entries kept their place in the list replaced, "
             f"{len(kept)} of them not run this time" if previous else "")
    print(f"{out}: {len(ran)} functions ran, {ran_bytes / 2**20:.2f} of {all_bytes / 2**20:.2f} MiB of code; "
          f"{len(entries) - exact} stable patterns, {exact} exact symbols{order}")


if __name__ == "__main__":
    main()
