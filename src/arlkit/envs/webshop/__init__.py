"""WebShop (Yao et al. 2022) offline: its pages, search and score over a shipped synthetic catalogue or
WebShop's own files (docs/environments.md#webshop)."""

from arlkit.envs.webshop.catalog import Catalog, CatalogFiles, DatasetError, Goal, Product, load_catalog
from arlkit.envs.webshop.env import WebshopConfig, WebshopEnv, purchase_score
from arlkit.envs.webshop.oracle import GoalOracle, goal_keywords
from arlkit.envs.webshop.reward import PurchaseScore, score_purchase

__all__ = [
    "Catalog",
    "CatalogFiles",
    "DatasetError",
    "Goal",
    "GoalOracle",
    "Product",
    "PurchaseScore",
    "WebshopConfig",
    "WebshopEnv",
    "goal_keywords",
    "load_catalog",
    "purchase_score",
    "score_purchase",
]
