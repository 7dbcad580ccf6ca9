"""Checks that a release binary's code layout still follows link/hot-code.ld.

Usage: check_layout.py BINARY [SCRIPT]. Reads the size of BINARY's .text.hot
section (readelf; stripped binaries keep their section headers) and the MiB
of code SCRIPT's header says its functions took when it was written, and
fails when the section holds under 85 % of that: the script has gone stale
(functions renamed or moved, or the build's hashes changed under its exact
symbols), and `sudo hack/profile-hot-code` should write it again.
"""

import re
import subprocess
import sys

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


def main():
    binary = sys.argv[1]
    script = sys.argv[2] if len(sys.argv) > 2 else "link/hot-code.ld"
    hot_mib = section_size(binary, ".text.hot") / 2**20
    wanted = listed_mib(script)
    share = hot_mib / wanted
    verdict = f".text.hot holds {hot_mib:.2f} MiB, {share:.0%} of the {wanted:.2f} MiB {script} listed"
    if share < THRESHOLD:
        sys.exit(f"{verdict}: under {THRESHOLD:.0%}, so the list is stale; run `sudo hack/profile-hot-code`")
    print(verdict)


if __name__ == "__main__":
    main()
