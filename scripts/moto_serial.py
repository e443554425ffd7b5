"""Runs moto's server handling one request at a time.

moto's own `moto_server` is threaded and takes no lock around its backends,
so two concurrent conditional writes can both succeed, which DynamoDB never
allows. Serialising requests restores DynamoDB's per-item atomicity, which
the conformance suite checks. Usage: moto_serial.py HOST PORT
"""

import os
import sys

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("moto_serial.py binds loopback only")
    # Some services put the port into the URLs they return (SQS queue URLs).
    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, app, threaded=False, use_reloader=False, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
