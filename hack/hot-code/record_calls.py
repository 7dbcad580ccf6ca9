"""Records which functions of a binary run, and when each first ran.

Usage: record_calls.py BINARY OUT. Places a uprobe at the entry of every
Rust function BINARY defines (tracefs: /sys/kernel/tracing/uprobe_events),
then, every half second until SIGTERM, reads each probe's hit count
(uprobe_profile). Every process running BINARY (the same file: probes belong
to its inode) is seen, from its first instruction. After every pass, writes
to OUT each function that has run, as the number of the pass that first saw
it and its symbol, in that order; removes its probes on exit. Needs root.

The probes stay on: each call traps (a few microseconds), which slows the
workloads but not enough to change what they run. Turning a probe off once
hit would be cheaper per call, but the kernel waits for an RCU grace period
at each, tens of milliseconds, minutes for a few thousand.
"""

import itertools
import os
import signal
import sys
import time

from elf_functions import functions

TRACING = "/sys/kernel/tracing"
GROUP = f"wqs_hot_code_{os.getpid()}"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def append_lines(path, lines):
    """Writes each line to a tracefs control file with a write of its own (the
    kernel parses one command per write; these files cannot seek, which
    Python's append mode does), skipping the lines it refuses."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    refused = 0
    try:
        for line in lines:
            try:
                os.write(fd, line.encode())
            except OSError:
                refused += 1
    finally:
        os.close(fd)
    return refused


def remove_probes(probes):
    """Removes this run's probes: all uprobes at once (a truncation, well under
    a second) when they are the only ones, else each on its own, which takes
    the kernel minutes for thousands."""
    with open(f"{TRACING}/uprobe_events") as events:
        others = [line for line in events if f":{GROUP}/" not in line]
    if others:
        append_lines(f"{TRACING}/uprobe_events", (f"-:{GROUP}/{name}\n" for name in probes))
    else:
        os.close(os.open(f"{TRACING}/uprobe_events", os.O_WRONLY | os.O_TRUNC))


def rust_functions(binary):
    """The symbols of each Rust function's entry, by file offset. Rust's
    only: a probe in the crypto crates' assembly (ring's AES-GCM, for one)
    made TLS fail ("cannot decrypt peer's message"), and the C and assembly
    ones, about 0.25 MiB, are not in sections of their own for the linker
    script to move anyway."""
    by_offset = {}
    for function in functions(binary):
        if function.symbol.startswith(("_ZN", "_R")):
            by_offset.setdefault(function.offset, []).append(function.symbol)
    return by_offset


def main():
    binary, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    by_offset = rust_functions(binary)
    probes = {f"f{i}": offset for i, offset in enumerate(sorted(by_offset))}
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    first_pass = {}  # probe name: the pass that first saw it hit
    try:
        refused = append_lines(f"{TRACING}/uprobe_events",
                               (f"p:{GROUP}/{name} {binary}:{offset:#x}\n" for name, offset in probes.items()))
        if refused:
            sys.exit(f"record_calls: the kernel refused {refused} of {len(probes)} probes")
        write(f"{TRACING}/events/{GROUP}/enable", "1")
        print(f"record_calls: {len(probes)} probes on {binary}", file=sys.stderr, flush=True)
        for pass_number in itertools.count():
            last_pass = bool(stopping)
            with open(f"{TRACING}/uprobe_profile") as profile:
                for line in profile:
                    _, name, hits = line.split()
                    if name in probes and int(hits) > 0:
                        first_pass.setdefault(name, pass_number)
            with open(out + ".tmp", "w") as f:
                f.writelines(f"{seen} {symbol}\n"
                             for name, seen in sorted(first_pass.items(), key=lambda item: item[1])
                             for symbol in by_offset[probes[name]])
            os.replace(out + ".tmp", out)
            if last_pass:
                break
            time.sleep(0.5)
    finally:
        if os.path.isdir(f"{TRACING}/events/{GROUP}"):
            write(f"{TRACING}/events/{GROUP}/enable", "0")
        remove_probes(probes)
    print(f"record_calls: {len(first_pass)} of {len(probes)} functions ran", file=sys.stderr)


if __name__ == "__main__":
    main()
