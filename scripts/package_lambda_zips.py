"""Packages built function binaries as Lambda zips: `bootstrap`, executable,
alone in `DIR/<binary>/bootstrap.zip`, where infra/template.yaml's CodeUri
points (the layout `cargo lambda build --output-format zip` leaves).

scripts/test.sh packages the functions it built for this machine with it,
then scripts/check_lambda_zips.py holds the zips to the template. Deploys
build arm64 release zips with cargo lambda (docs/deploying.md).
Usage: package_lambda_zips.py BIN_DIR ZIP_DIR BINARY...
"""

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile


def package(binary: str, out: str) -> None:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # Symbols stripped, as the release profile strips them: Lambda
        # unpacks at most 250 MB, and a debug build's symbols are most of it.
        stripped = os.path.join(tmp, "bootstrap")
        if shutil.which("strip"):
            subprocess.run(["strip", "--strip-all", "-o", stripped, binary], check=True)
        else:
            shutil.copyfile(binary, stripped)
        info = zipfile.ZipInfo("bootstrap", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o100755 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        partial = out + ".partial"
        with zipfile.ZipFile(partial, "w") as z, open(stripped, "rb") as f:
            z.writestr(info, f.read(), compresslevel=1)
        # Whole or not at all: a reader never sees half a zip.
        os.replace(partial, out)


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    bin_dir, zip_dir, binaries = sys.argv[1], sys.argv[2], sys.argv[3:]
    for name in binaries:
        binary = os.path.join(bin_dir, name)
        if not os.path.isfile(binary):
            sys.exit(f"{binary}: not built")
        package(binary, os.path.join(zip_dir, name, "bootstrap.zip"))


if __name__ == "__main__":
    main()
