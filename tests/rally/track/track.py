"""A search runner that checks its answer.

Rally's own `search` runner reports how many hits a search returned but not
what they were, so a cluster answering every query with every document
would pass it. `checked-search` compares named values of the answer
(dotted paths, list items by number) with the ones the corpus must give,
and fails the task (`--on-error=abort` stops the race) on any difference.
"""

from esrally import exceptions


def _at(answer, path):
    value = answer
    for part in path.split("."):
        if isinstance(value, list):
            value = value[int(part)]
        else:
            value = value[part]
    return value


async def checked_search(es, params):
    response = await es.search(index=params["index"], body=params["body"])
    answer = response.body if hasattr(response, "body") else response
    for path, expected in params["expect"].items():
        try:
            actual = _at(answer, path)
        except (KeyError, IndexError, TypeError):
            actual = "<absent>"
        if actual != expected:
            raise exceptions.RallyAssertionError(
                f"{params.get('name', 'search')}: {path} is {actual!r}, expected {expected!r}"
            )
    return {"weight": 1, "unit": "ops", "success": True, "hits": _at(answer, "hits.total.value")}


def register(registry):
    registry.register_runner("checked-search", checked_search, async_runner=True)
