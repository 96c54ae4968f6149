#!/usr/bin/env python3
"""Which of a running binary's ELF sections its process has mapped, page by page.

Usage: tests/bench/mapped_sections.py PID [BINARY]

For every mapping of BINARY (default: the process's /proc/PID/exe) in /proc/PID/maps, the
present bit of each page in /proc/PID/pagemap says whether the page is mapped now; the
page's file offset names the section it holds (a page holding two sections counts for
each). Printed per section: its size, the KB of it mapped, and whether those pages are
private anonymous copies (a written RELRO page) or the file's own (page cache).

Needs read access to /proc/PID/pagemap (the same user, or root).
"""

import os
import struct
import subprocess
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def sections(binary):
    out = subprocess.run(
        ["readelf", "-SW", binary], capture_output=True, text=True, check=True
    ).stdout
    found = []
    for line in out.splitlines():
        line = line.replace("[ ", "[")
        fields = line.split()
        if len(fields) < 7 or not fields[0].startswith("["):
            continue
        name, kind = fields[1], fields[2]
        try:
            offset, size = int(fields[4], 16), int(fields[5], 16)
        except ValueError:
            continue
        if kind == "NOBITS" or size == 0:
            continue
        found.append((name, offset, size))
    return found


def mappings(pid, binary):
    real = os.path.realpath(binary)
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) < 6 or os.path.realpath(fields[5]) != real:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            yield start, end, int(fields[2], 16), fields[1]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pid = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else os.readlink(f"/proc/{pid}/exe")
    table = sections(binary)
    mapped = {name: [0, 0] for name, _, _ in table}
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for start, end, offset, perms in mappings(pid, binary):
            pages = (end - start) // PAGE
            pagemap.seek(start // PAGE * 8)
            entries = struct.unpack(f"{pages}Q", pagemap.read(pages * 8))
            for i, entry in enumerate(entries):
                if not entry >> 63 & 1:
                    continue
                # bit 61: a file page or shared anonymous; clear on a private written copy.
                anon = not entry >> 61 & 1
                lo = offset + i * PAGE
                hi = lo + PAGE
                for name, s_off, s_size in table:
                    if s_off < hi and lo < s_off + s_size:
                        mapped[name][1 if anon else 0] += 1
    total_file = total_anon = 0
    print(f"{'section':20s} {'size KB':>9s} {'file KB':>9s} {'anon KB':>9s}")
    for name, _, size in table:
        file_pages, anon_pages = mapped[name]
        if not (file_pages or anon_pages):
            continue
        total_file += file_pages
        total_anon += anon_pages
        print(
            f"{name:20s} {size / 1024:9.1f} {file_pages * PAGE / 1024:9.1f}"
            f" {anon_pages * PAGE / 1024:9.1f}"
        )
    print(
        f"{'(sum, shared pages twice)':20s} {'':9s} {total_file * PAGE / 1024:9.1f}"
        f" {total_anon * PAGE / 1024:9.1f}"
    )


if __name__ == "__main__":
    main()
