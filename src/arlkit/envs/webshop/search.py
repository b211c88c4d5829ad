"""BM25 product search (WebShop's engine searches a Lucene index with pyserini, a Java library).

arlkit scores the same documents (:attr:`Product.search_text`: title, description, first feature and
options, lower-cased) with ``bm25s``, a maintained pure-Python BM25 on sparse matrices whose ``lucene``
variant is the BM25 pyserini computes, with pyserini's parameters (k1 = 0.9, b = 0.4), English stop words
and Porter stemming (``snowballstemmer``), as pyserini's default analyzer does. A search returns the
top 50 products (WebShop's ``SEARCH_RETURN_N``) that share a term with the query, best first, ties in
catalogue order, so results are deterministic.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from arlkit.config import ConfigError
from arlkit.envs.webshop.catalog import Product
from arlkit.extras import install_hint

__all__ = ["INSTALL_HINT", "SEARCH_RETURN_N", "SearchIndex", "normalize_query", "require_extra"]

SEARCH_RETURN_N = 50
"""Results a search returns (WebShop's)."""
_MAX_CACHED = 8192


INSTALL_HINT = install_hint("webshop", make_target="install")
_PACKAGES = ("bm25s", "snowballstemmer")


def require_extra() -> None:
    """Raise a :class:`~arlkit.config.ConfigError` naming the install when a package of the extra is missing."""
    for name in _PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"the webshop environment needs {name} ({exc}); {INSTALL_HINT}") from None


def normalize_query(query: str) -> str:
    """The canonical form of a query: lower case, single spaces."""
    return " ".join(query.lower().split())


class SearchIndex:
    """A BM25 index over products, built on first search; results are cached per query."""

    def __init__(self, products: Sequence[Product]) -> None:
        self.products = tuple(products)
        self._index: Any = None
        self._tokenizer: Any = None
        self._cache: dict[str, tuple[str, ...]] = {}

    def _build(self) -> None:
        require_extra()
        import bm25s
        import snowballstemmer
        from bm25s.tokenization import Tokenizer

        tokenizer = Tokenizer(stopwords="en", stemmer=snowballstemmer.stemmer("porter"))
        ids = tokenizer.tokenize([p.search_text for p in self.products], return_as="ids", show_progress=False)
        index = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
        index.index(ids, show_progress=False)
        self._tokenizer, self._index = tokenizer, index

    def search(self, query: str) -> tuple[str, ...]:
        """The asins of the top :data:`SEARCH_RETURN_N` products for ``query``, best first."""
        key = normalize_query(query)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self._index is None:
            self._build()
        import numpy as np

        tokens = self._tokenizer.tokenize([key], return_as="ids", update_vocab=False, show_progress=False)[0]
        scores = np.asarray(self._index.get_scores(tokens), dtype=np.float64)
        order = np.lexsort((np.arange(len(scores)), -scores))  # best first, ties in catalogue order
        found = tuple(self.products[i].asin for i in order[:SEARCH_RETURN_N] if scores[i] > 0)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[key] = found
        return found
