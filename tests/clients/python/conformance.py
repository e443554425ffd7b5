"""Drives a Floe deployment with the official Elasticsearch Python client.

Run by tests/tests/official_clients.rs with the client under test on
PYTHONPATH (8.x or 9.x, pinned in requirements-es8.txt / -es9.txt and
installed by scripts/test.sh). Reaches the cluster either through the
control plane's proxy with a bearer token (FLOE_PROXY_URL, FLOE_TOKEN) or a
Floe API key given to the client as its `api_key` (FLOE_PROXY_URL,
FLOE_API_KEY: the client sends `Authorization: ApiKey ...`), or
directly at the deployment's endpoint with nothing but its CA and the
`elastic` user's password (FLOE_ENDPOINT, FLOE_CA_FILE, FLOE_PASSWORD): no
host name override, no unverified TLS.

Each call's outcome is printed as one JSON line: {"call", "ok", "detail"}.
The exit status is 0 only when every call worked.
"""

import json
import os
import sys
import traceback

import elasticsearch
from elasticsearch import Elasticsearch, helpers


def client():
    common = {"request_timeout": 30, "retry_on_timeout": False, "max_retries": 0}
    if "FLOE_ENDPOINT" in os.environ:
        return Elasticsearch(
            os.environ["FLOE_ENDPOINT"],
            ca_certs=os.environ["FLOE_CA_FILE"],
            basic_auth=("elastic", os.environ["FLOE_PASSWORD"]),
            **common,
        )
    if "FLOE_API_KEY" in os.environ:
        return Elasticsearch(
            os.environ["FLOE_PROXY_URL"], api_key=os.environ["FLOE_API_KEY"], **common
        )
    return Elasticsearch(
        os.environ["FLOE_PROXY_URL"], bearer_auth=os.environ["FLOE_TOKEN"], **common
    )


def main():
    es = client()
    repo = None
    # Names of this run's own, so that a second client can run after it.
    prefix = os.environ.get("FLOE_NAME_PREFIX", "")
    index = f"{prefix}conformance-logs"
    restored = f"restored-{index}"
    snapshot = f"{prefix}conformance-snap"
    expected_version = os.environ["FLOE_ES_VERSION"]
    outcomes = []

    def check(name, fn):
        try:
            detail = fn()
            outcomes.append({"call": name, "ok": True, "detail": detail})
        except Exception as e:  # every failure is a row of the table
            outcomes.append(
                {
                    "call": name,
                    "ok": False,
                    "detail": f"{type(e).__name__}: {e}",
                    "trace": traceback.format_exc(limit=3),
                }
            )

    def info():
        number = es.info()["version"]["number"]
        assert number == expected_version, f"version {number}, expected {expected_version}"
        return number

    def health():
        return es.cluster.health(wait_for_status="yellow", timeout="10s")["status"]

    def cat_apis():
        es.cat.health(format="json")
        nodes = es.cat.nodes(format="json", h="ip,name,version")
        versions = {n["version"] for n in nodes}
        assert versions == {expected_version}, f"_cat/nodes versions {versions}"
        es.cat.indices(format="json")
        text = es.cat.health()
        assert isinstance(text, str) or hasattr(text, "body")
        return len(nodes)

    def create_index():
        es.indices.create(
            index=index,
            settings={"number_of_shards": 1, "number_of_replicas": 0},
            mappings={"properties": {"message": {"type": "text"}, "n": {"type": "long"}}},
        )
        return index

    def bulk():
        actions = ({"_index": index, "_id": str(i), "_source": {"message": f"line {i}", "n": i}} for i in range(50))
        ok, errors = helpers.bulk(es, actions, refresh=True)
        assert ok == 50 and not errors, (ok, errors)
        return ok

    def count():
        n = es.count(index=index)["count"]
        assert n == 50, n
        return n

    def search():
        hits = es.search(index=index, query={"match_all": {}}, size=5)["hits"]
        assert hits["total"]["value"] == 50, hits["total"]
        assert len(hits["hits"]) == 5
        return hits["total"]["value"]

    def search_semantics():
        # What a real cluster answers for the same 50 documents: a range
        # sorted descending, a term on a number, an aggregation.
        r = es.search(
            index=index,
            query={"range": {"n": {"gte": 10, "lt": 20}}},
            sort=[{"n": "desc"}],
            size=3,
        )
        ns = [h["_source"]["n"] for h in r["hits"]["hits"]]
        assert r["hits"]["total"]["value"] == 10 and ns == [19, 18, 17], (r["hits"]["total"], ns)
        assert es.count(index=index, query={"match": {"message": "7"}})["count"] == 1
        aggs = es.search(index=index, size=0, aggs={"top": {"max": {"field": "n"}}, "h": {"histogram": {"field": "n", "interval": 25}}})
        assert aggs["aggregations"]["top"]["value"] == 49.0, aggs["aggregations"]
        assert [b["doc_count"] for b in aggs["aggregations"]["h"]["buckets"]] == [25, 25], aggs["aggregations"]
        return ns

    def scan():
        seen = sum(1 for _ in helpers.scan(es, index=index, query={"query": {"range": {"n": {"lt": 40}}}}, size=7))
        assert seen == 40, seen
        return seen
    def admin_apis():
        # What Rally calls around a race, and aliases and templates.
        es.indices.forcemerge(index=index, max_num_segments=1)
        es.indices.flush(index=index)
        stats = es.indices.stats(index=index, metric="_all", level="shards")
        docs = stats["_all"]["primaries"]["docs"]["count"]
        assert docs == 50, docs
        nodes = es.nodes.stats(metric="jvm")["nodes"]
        assert all("collectors" in n["jvm"]["gc"] for n in nodes.values()), nodes
        assert es.cluster.stats()["indices"]["docs"]["count"] >= 50
        alias = f"{index}-alias"
        es.indices.update_aliases(actions=[{"add": {"index": index, "alias": alias}}])
        n = es.count(index=alias)["count"]
        assert n == 50, n
        template = f"{prefix}conformance-template"
        es.indices.put_index_template(
            name=template,
            index_patterns=[f"{prefix}conformance-templated-*"],
            template={"settings": {"number_of_shards": 2}},
        )
        created = f"{prefix}conformance-templated-1"
        es.indices.create(index=created)
        shards = es.indices.get_settings(index=created)[created]["settings"]["index"]["number_of_shards"]
        assert shards == "2", shards
        return docs

    def get_repository():
        # The repository Floe registered for the deployment's snapshots.
        nonlocal repo
        repo = next(iter(es.snapshot.get_repository()))
        return repo

    def snapshot_create():
        r = es.snapshot.create(
            repository=repo, snapshot=snapshot, indices=index, wait_for_completion=True
        )
        assert r["snapshot"]["state"] == "SUCCESS", r
        return r["snapshot"]["state"]

    def snapshot_get():
        r = es.snapshot.get(repository=repo, snapshot=snapshot)
        assert r["snapshots"][0]["snapshot"] == snapshot, r
        return len(r["snapshots"])

    def snapshot_restore():
        r = es.snapshot.restore(
            repository=repo,
            snapshot=snapshot,
            indices=index,
            rename_pattern="(.+)",
            rename_replacement="restored-$1",
            wait_for_completion=True,
        )
        assert r["snapshot"]["shards"]["failed"] == 0, r
        es.indices.refresh(index=restored)
        n = es.count(index=restored)["count"]
        assert n == 50, n
        return n

    def authenticate():
        return es.security.authenticate()["username"]

    def ping():
        assert es.ping()
        return True

    def sniffing():
        # Sniffing reaches each node at the address _nodes/http publishes:
        # every node's certificate must name its own address.
        if "FLOE_ENDPOINT" not in os.environ:
            return "through the proxy: nothing to sniff"
        direct = {
            "ca_certs": os.environ["FLOE_CA_FILE"],
            "basic_auth": ("elastic", os.environ["FLOE_PASSWORD"]),
            "request_timeout": 30,
            "max_retries": 0,
        }
        published = sorted(
            n["http"]["publish_address"]
            for n in es.nodes.info(metric="http")["nodes"].values()
        )
        assert published, "no node publishes an HTTP address"
        for address in published:
            Elasticsearch(f"https://{address}", **direct).info()
        # The client's sniffing requests carry only the node's own
        # credentials (the URL's), not basic_auth: the client's documented
        # way to sniff a secured cluster.
        scheme, rest = os.environ["FLOE_ENDPOINT"].split("://", 1)
        seed = f"{scheme}://elastic:{os.environ['FLOE_PASSWORD']}@{rest}"
        sniffed = Elasticsearch(
            seed,
            ca_certs=os.environ["FLOE_CA_FILE"],
            sniff_on_start=True,
            request_timeout=30,
            max_retries=0,
        )
        hosts = sorted(f"{n.config.host}:{n.config.port}" for n in sniffed.transport.node_pool.all())
        for _ in range(2 * len(hosts)):
            sniffed.info()
        # The pool keeps the endpoint it was seeded with, beside every node.
        assert set(published) <= set(hosts), (hosts, published)
        return published

    check("info", info)
    check("ping", ping)
    check("cluster.health", health)
    check("cat", cat_apis)
    check("indices.create", create_index)
    check("helpers.bulk", bulk)
    check("count", count)
    check("search", search)
    check("search semantics", search_semantics)
    check("helpers.scan", scan)
    check("admin APIs", admin_apis)
    check("snapshot.get_repository", get_repository)
    check("snapshot.create", snapshot_create)
    check("snapshot.get", snapshot_get)
    check("snapshot.restore", snapshot_restore)
    check("security.authenticate", authenticate)
    check("sniffing", sniffing)

    client_version = ".".join(str(p) for p in elasticsearch.__versionstr__.split(".")[:3])
    for o in outcomes:
        o["client"] = client_version
        print(json.dumps(o))
    return 0 if all(o["ok"] for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
