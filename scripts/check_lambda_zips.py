"""Checks the Lambda zips that `cargo lambda build --output-format zip` made,
and that infra/template.yaml deploys exactly those.

Each function's CodeUri must name a zip that exists, holding one file,
`bootstrap`, executable, an ELF for the expected architecture (Lambda's
provided.al2023 runtime runs nothing else). Usage:
check_lambda_zips.py TEMPLATE ARCH   (ARCH: aarch64 or x86_64)
"""

import os
import re
import stat
import sys
import zipfile

# ELF e_machine values.
MACHINES = {"aarch64": 0xB7, "x86_64": 0x3E}


def check_zip(path: str, arch: str) -> list[str]:
    if not os.path.isfile(path):
        return [f"{path}: missing (the template deploys it)"]
    problems = []
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        if names != ["bootstrap"]:
            return [f"{path}: holds {names}, not just bootstrap"]
        info = z.getinfo("bootstrap")
        mode = info.external_attr >> 16
        if not mode & stat.S_IXUSR:
            problems.append(f"{path}: bootstrap is not executable (mode {oct(mode)})")
        head = z.open("bootstrap").read(20)
    if head[:4] != b"\x7fELF":
        return problems + [f"{path}: bootstrap is not an ELF file"]
    if head[4] != 2 or head[5] != 1:
        problems.append(f"{path}: bootstrap is not a 64-bit little-endian ELF")
    machine = int.from_bytes(head[18:20], "little")
    if machine != MACHINES[arch]:
        problems.append(f"{path}: bootstrap is for ELF machine {machine:#x}, not {arch}")
    return problems


def main() -> None:
    template, arch = sys.argv[1], sys.argv[2]
    if arch not in MACHINES:
        sys.exit(f"unknown architecture {arch}")
    base = os.path.dirname(template)
    with open(template) as f:
        uris = re.findall(r"^\s+CodeUri:\s*(\S+)\s*$", f.read(), re.MULTILINE)
    if not uris:
        sys.exit(f"{template}: no CodeUri")
    problems = []
    for uri in uris:
        path = os.path.normpath(os.path.join(base, uri))
        found = check_zip(path, arch)
        problems += found
        if not found:
            size = os.path.getsize(path)
            print(f"   {path}: bootstrap, ELF {arch}, zip {size / 1e6:.1f} MB")
    if problems:
        sys.exit("\n".join(problems))


if __name__ == "__main__":
    main()
