"""Runs moto's server handling one request at a time.

moto's own `moto_server` is threaded and takes no lock around its backends,
so two concurrent conditional writes can both succeed, which DynamoDB never
allows. Serialising requests restores DynamoDB's per-item atomicity, which
the conformance suite checks. Usage: moto_serial.py HOST PORT

PORT 0 asks for any free port. Once bound, the server prints
`listening on HOST:PORT` (the port it has) as its first line on standard
output, so a caller that starts one (scripts/test.sh, or a heavy suite
starting a server of its own: tests/src/moto_server.rs) knows where and
when it answers without choosing a port first and racing for it.

One change to how moto keeps DynamoDB's transactions all-or-nothing, not
to what they do: moto backs up every table a TransactWriteItems touches,
whole, before it writes, and puts the backup back when the transaction is
cancelled. That copy is O(items in the table) for every transaction, which
is most of moto's time once a table holds a few hundred records (a fleet
of 350 deployments: 88% of it), and why a suite slowed as its table
filled. Here a transaction instead backs up the items it names, and a
cancelled one puts exactly those back, in the same place: the outcome of
every transaction, cancelled or not, is the one moto gives. (A table with
a stream keeps moto's own whole-table backup, which also rolls the
stream back.) The store's conformance suite holds both paths to
DynamoDB's rules on every run.
"""

import copy
import os
import sys
import types

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server


def back_up_items_not_tables() -> None:
    """Makes TransactWriteItems back up the items it names, not their tables."""
    from moto.dynamodb import models
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    # The backend copies each touched table with `copy.deepcopy` (the
    # module's `copy`); while one of our transactions runs, a Table is
    # handed back as it is instead, so moto's own restore puts back the
    # very object it already holds, and the items' backup below does the
    # restoring. Everything else is copied as before.
    skip_tables = [False]

    def deepcopy(value, memo=None):
        if skip_tables[0] and isinstance(value, Table):
            return value
        return copy.deepcopy(value, memo)

    models.copy = types.SimpleNamespace(deepcopy=deepcopy, copy=copy.copy)
    transact = DynamoDBBackend.transact_write_items

    def slot(table, op):
        """The (hash, range) key that an operation writes, or None when it
        names no table or key that could have been written."""
        if "Key" in op:
            attrs = op["Key"]
        elif "Item" in op:
            attrs = op["Item"]
        else:
            return None
        hash_key = DynamoType(attrs[table.hash_key_attr])
        range_key = None
        if table.range_key_attr is not None:
            range_key = DynamoType(attrs[table.range_key_attr])
        return hash_key, range_key

    def transact_write_items(self, transact_items):
        backup = []
        for entry in transact_items:
            if not isinstance(entry, dict):
                continue
            for op in entry.values():
                table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
                if table is None:
                    continue
                if table.stream_shard is not None:
                    # moto's whole-table backup, stream and all.
                    return transact(self, transact_items)
                try:
                    key = slot(table, op)
                    current = None if key is None else table.get_item(*key)
                except Exception:  # noqa: BLE001
                    # A malformed operation writes nothing: moto refuses
                    # it (and cancels the transaction) when it gets there.
                    continue
                if key is not None:
                    backup.append((table, key, copy.deepcopy(current)))
        skip_tables[0] = True
        try:
            return transact(self, transact_items)
        except BaseException:
            # Cancelled: each named item as it was, the first backup of a
            # key last, so a key named twice gets its state from before.
            for table, (hash_key, range_key), item in reversed(backup):
                if range_key is None:
                    if item is None:
                        table.items.pop(hash_key, None)
                    else:
                        table.items[hash_key] = item
                else:
                    ranges = table.items[hash_key]
                    if item is None:
                        ranges.pop(range_key, None)
                        if not ranges:
                            del table.items[hash_key]
                    else:
                        ranges[range_key] = item
            raise
        finally:
            skip_tables[0] = False

    DynamoDBBackend.transact_write_items = transact_write_items


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    if host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("moto_serial.py binds loopback only")
    back_up_items_not_tables()
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server(host, port, app, threaded=False, request_handler=MotoRequestHandler)
    port = server.server_port
    # Some services put the port into the URLs they return (SQS queue
    # URLs); they read it per request, so the bound one is set here.
    os.environ.setdefault("MOTO_PORT", str(port))
    print(f"listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
