"""Writes arlkit's synthetic WebShop catalogue (``src/arlkit/data/webshop/*.json.gz``, WebShop's file format).

Every product and goal comes from the seeded grammar below: 5 of WebShop's categories, 6 product types
each (a search query, a type noun, category levels, 8 attributes and the option names and values the type
sells), 40 products per type, and goals written in WebShop's instruction format for products picked at
random. A product gets 3-5 of its type's attributes, a made-up brand, a price in its type's range and 2-5
values of each of its type's options; its title, features and description are built from its own
attributes only. A goal names 1-3 of its product's attributes and one value of each of its options; the
loader appends WebShop's price clause.

Checks kept by construction (the generator stops on the first that fails): no option value occurs in its
product's text; none of a type's attributes that a product lacks matches it; the goal product bought with
the goal's options scores 1; and a search with the goal's key words shows the goal product on the first
results page (goals where it does not are dropped, as are repeated instructions). Values of one option may
match each other under WebShop's fuzzy rule (``x-large`` matches a goal's ``large``, ``50 bags`` its
``20 bags``), as they do in WebShop's own catalogue. Run
``.venv/bin/python scripts/data/make_webshop_catalog.py``; the tests check the shipped files decompress
to this output.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

from arlkit.envs.webshop.catalog import build_catalog
from arlkit.envs.webshop.oracle import goal_keywords
from arlkit.envs.webshop.reward import attribute_matched, score_purchase
from arlkit.envs.webshop.search import SearchIndex

OUT = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "webshop"
SEED = 19
PRODUCTS_PER_TYPE = 40
GOALS = 1500
FILES = ("items_shuffle_synthetic.json", "items_ins_v2_synthetic.json", "items_human_ins_synthetic.json",
         "reviews_synthetic.json")  # fmt: skip

COLORS = ("black", "white", "navy", "gray", "red", "green", "blue", "pink", "purple", "brown", "beige", "teal")
CLOTHING = ("small", "medium", "large", "x-large", "xx-large")

# category -> (root levels, [(query, type noun, further levels, attributes, {option: values}, (low, high) price)])
GRAMMAR: dict[str, tuple[str, list[tuple[str, str, str, str, dict[str, tuple[str, ...]], tuple[float, float]]]]] = {
    "beauty": ("Beauty & Personal Care", [
        ("shampoo", "shampoo", "Hair Care › Shampoo & Conditioner › Shampoos",
         "sulfate free|paraben free|tea tree|argan oil|color safe|dry scalp|natural ingredients|cruelty free",
         {"size": ("8 fl oz", "12 fl oz", "16 fl oz", "32 fl oz"),
          "scent": ("eucalyptus", "citrus", "unscented", "vanilla", "peppermint", "sandalwood")}, (6, 38)),
        ("lipstick", "lipstick", "Makeup › Lips › Lipstick",
         "long lasting|matte finish|waterproof|vegan formula|moisturizing|high pigment|smudge proof|travel size",
         {"color": ("red", "pink", "coral", "plum", "nude", "berry", "mauve")}, (5, 30)),
        ("face moisturizer", "face moisturizer", "Skin Care › Face › Creams & Moisturizers",
         "hyaluronic acid|oil free|fragrance free|sensitive skin|anti aging|spf 30|non comedogenic|dermatologist tested",
         {"size": ("1.7 oz", "2.5 oz", "3.4 oz")}, (9, 55)),
        ("nail polish", "nail polish", "Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
         "quick dry|chip resistant|high shine|non toxic|gel effect|easy removal|salon quality|thick coverage",
         {"color": COLORS[:2] + ("red", "pink", "purple", "gold", "silver", "teal")}, (4, 19)),
        ("hair dryer", "hair dryer", "Hair Care › Styling Tools & Appliances › Hair Dryers",
         "ionic technology|low noise|foldable handle|fast drying|diffuser included|ceramic coating|cool shot|"
         "lightweight design", {"color": ("black", "white", "pink", "purple", "gray")}, (18, 95)),
        ("body wash", "body wash", "Personal Care › Bath & Bathing Accessories › Body Washes",
         "shea butter|aloe vera|phthalate free|deep cleansing|plant based|dry skin relief|ph balanced|gentle formula",
         {"scent": ("eucalyptus", "citrus", "coconut", "oatmeal", "jasmine"), "size": ("10 fl oz", "18 fl oz", "30 fl oz")},
         (5, 26)),
    ]),
    "fashion": ("Clothing, Shoes & Jewelry", [
        ("men's t-shirts", "t-shirt for men", "Men › Clothing › Shirts › T-Shirts",
         "short sleeve|crew neck|machine washable|slim fit|moisture wicking|pre shrunk|tagless collar|breathable fabric",
         {"color": COLORS[:7], "size": CLOTHING}, (8, 38)),
        ("women's running shoes", "running shoes for women", "Women › Shoes › Athletic › Running",
         "arch support|non slip|memory foam|mesh upper|lace up|shock absorbing|wide toe box|rubber sole",
         {"color": ("black", "white", "pink", "gray", "blue", "purple"), "size": ("6", "7", "8", "9", "10")}, (30, 120)),
        ("men's hoodies", "hoodie for men", "Men › Clothing › Active › Active Hoodies",
         "fleece lined|kangaroo pocket|drawstring hood|zip up|ribbed cuffs|heavyweight cotton|relaxed fit|side seam",
         {"color": ("black", "gray", "navy", "green", "brown", "red"), "size": CLOTHING}, (20, 70)),
        ("women's dresses", "dress for women", "Women › Clothing › Dresses",
         "v neck|knee length|floral print|long sleeve|empire waist|side pockets|wrinkle free|a line",
         {"color": ("black", "blue", "red", "green", "pink", "purple", "beige"),
          "size": ("x-small", "small", "medium", "large", "x-large")}, (18, 80)),
        ("laptop backpack", "laptop backpack", "Luggage & Travel Gear › Backpacks › Laptop Backpacks",
         "water resistant|usb charging port|anti theft|padded straps|luggage strap|large capacity|reflective strips|"
         "hidden pocket", {"color": ("black", "gray", "navy", "blue", "green")}, (22, 90)),
        ("sunglasses", "sunglasses", "Men › Accessories › Sunglasses & Eyewear Accessories › Sunglasses",
         "polarized lenses|uv400 protection|metal frame|spring hinges|mirrored finish|anti glare|carrying case|"
         "scratch resistant", {"color": ("black", "gold", "silver", "brown", "blue")}, (10, 60)),
    ]),
    "electronics": ("Electronics", [
        ("wireless earbuds", "earbuds", "Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
         "noise cancelling|charging case|bluetooth 5.3|touch control|sweat proof|built in microphone|deep bass|"
         "fast charging", {"color": ("black", "white", "blue", "pink", "green")}, (15, 130)),
        ("usb c charger", "usb c charger", "Computers & Accessories › Chargers & Adapters › Wall Chargers",
         "quick charge|foldable plug|dual port|compact design|overheat protection|gan technology|universal voltage|"
         "led indicator", {"color": ("black", "white"), "wattage": ("20w", "30w", "45w", "65w")}, (9, 49)),
        ("portable power bank", "power bank", "Cell Phones & Accessories › Chargers & Power Adapters › Portable Power Banks",
         "20000mah capacity|led display|usb c input|slim profile|built in flashlight|airline approved|multiple outputs|"
         "pass through charging", {"color": ("black", "white", "blue", "pink")}, (14, 60)),
        ("bluetooth speaker", "bluetooth speaker", "Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
         "waterproof ip67|24 hour playtime|stereo pairing|rugged build|outdoor use|loud sound|usb charging|party lights",
         {"color": ("black", "blue", "red", "gray", "green")}, (19, 110)),
        ("hdmi cable", "hdmi cable", "Television & Video › Accessories › Cables › HDMI Cables",
         "4k resolution|braided jacket|high speed|ethernet channel|120hz support|corrosion proof|slim connectors|"
         "hdr compatible", {"length": ("3 ft", "6 ft", "10 ft", "25 ft")}, (6, 30)),
        ("wireless mouse", "wireless mouse", "Computers & Accessories › Keyboards, Mice & Accessories › Mice",
         "ergonomic design|silent click|rechargeable battery|adjustable dpi|usb receiver|ambidextrous shape|"
         "long battery life|plug and play", {"color": ("black", "white", "gray", "pink", "blue")}, (8, 45)),
    ]),
    "food": ("Grocery & Gourmet Food", [
        ("protein bars", "protein bars", "Snacks & Sweets › Bars › Protein Bars",
         "gluten free|low sugar|keto friendly|non gmo|plant based|no artificial sweeteners|individually wrapped|soy free",
         {"flavor": ("chocolate", "peanut butter", "cookie dough", "salted caramel", "blueberry"),
          "size": ("12 count", "24 count")}, (14, 45)),
        ("ground coffee", "ground coffee", "Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
         "medium roast|dark roast|single origin|fair trade|usda organic|arabica beans|low acid|kosher certified",
         {"size": ("12 oz", "2 lb", "5 lb")}, (7, 48)),
        ("herbal tea", "herbal tea", "Beverages › Coffee, Tea & Cocoa › Tea › Herbal",
         "caffeine free|compostable tea bags|sleep support|immune blend|no added sugar|whole leaves|naturally sweet|"
         "digestive aid", {"flavor": ("chamomile", "peppermint", "ginger", "hibiscus", "lemon balm"),
                           "size": ("20 bags", "50 bags", "100 bags")}, (4, 24)),
        ("extra virgin olive oil", "extra virgin olive oil", "Pantry Staples › Cooking Oils › Olive Oils",
         "cold pressed|first harvest|glass bottle|single estate|high polyphenol|unfiltered|mediterranean origin|"
         "dark tin", {"size": ("500 ml", "750 ml", "1 liter")}, (9, 45)),
        ("mixed nuts", "mixed nuts", "Snacks & Sweets › Nuts & Seeds › Mixed Nuts",
         "lightly salted|unsalted|dry roasted|zip pouch|heart healthy|vegan snack|no shells|premium cashews",
         {"size": ("8 oz", "16 oz", "32 oz")}, (6, 35)),
        ("pasta", "pasta", "Pantry Staples › Pasta & Noodles › Dry Pasta",
         "whole wheat|high fiber|durum semolina|quick cooking|italian made|egg free|slow dried|family size",
         {"shape": ("penne", "spaghetti", "fusilli", "rigatoni", "farfalle"), "size": ("1 lb", "2 lb", "6 lb")},
         (3, 22)),
    ]),
    "furniture": ("Home & Kitchen", [
        ("office chair", "office chair", "Furniture › Home Office Furniture › Home Office Chairs",
         "lumbar support|adjustable height|mesh back|padded armrests|swivel base|headrest|tilt lock|heavy duty",
         {"color": ("black", "gray", "white", "blue")}, (60, 320)),
        ("bookshelf", "bookshelf", "Furniture › Living Room Furniture › Bookcases",
         "5 tier|easy assembly|solid wood|wall anchor|industrial style|open shelves|space saving|sturdy frame",
         {"color": ("black", "white", "brown", "gray")}, (40, 220)),
        ("bed sheets", "bed sheet set", "Bedding › Sheets & Pillowcases › Sheet & Pillowcase Sets",
         "deep pocket|microfiber|wrinkle resistant|cooling|hypoallergenic|fade resistant|soft brushed|all season",
         {"color": ("white", "gray", "navy", "beige", "green"), "size": ("twin", "full", "queen", "king")}, (20, 90)),
        ("end table", "end table", "Furniture › Living Room Furniture › Tables › End Tables",
         "storage drawer|charging station|tempered glass|rustic finish|hairpin legs|round top|tool free setup|"
         "open shelf", {"color": ("black", "white", "brown", "gray")}, (30, 140)),
        ("loveseat sofa", "loveseat sofa", "Furniture › Living Room Furniture › Sofas & Couches",
         "velvet upholstery|removable cushions|tufted back|convertible|compact size|high density foam|stain resistant|"
         "wooden legs", {"color": ("gray", "blue", "beige", "green", "pink")}, (180, 700)),
        ("desk lamp", "desk lamp", "Lighting & Ceiling Fans › Lamps & Shades › Desk Lamps",
         "dimmable|touch control|usb port|eye caring|flexible gooseneck|memory function|clamp mount|timer setting",
         {"color": ("black", "white", "silver", "gray")}, (15, 70)),
    ]),
}  # fmt: skip

_SYLLABLES = "ka lo mi ra ve to nu sa li da po re vi mo ta ne zu fa".split()
_DETAILS = ("made for everyday use", "a thoughtful detail", "built to hold up", "tested by our team", "easy to love")
_REVIEWS = (("Great value", "5.0", "Exactly as described and arrived quickly."),
            ("Works well", "4.0", "Does the job. Would buy again."), ("Just okay", "3.0", "Fine for the price."),
            ("Not for me", "2.0", "It did not suit me, but the seller was helpful."))  # fmt: skip
_OPENINGS = ("i need {noun} that is {attrs}", "i am looking for {attrs} {noun}", "find me {attrs} {noun}",
             "i want to buy {noun} which is {attrs}", "i'd like {attrs} {noun}")  # fmt: skip


def _brand(rng: random.Random) -> str:
    return "".join(rng.sample(_SYLLABLES, 2)).capitalize() + rng.choice(("", "co", "ix", "ora", "elle"))


def _subset(rng: random.Random, items: list[str], k: int) -> list[str]:
    """``k`` of ``items`` drawn at random, in their original order."""
    drawn = set(rng.sample(items, k))
    return [item for item in items if item in drawn]


def _title_case(text: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in text.split())


def _product(rng: random.Random, asin: str, category: str, root: str, spec: tuple[Any, ...]) -> dict[str, Any]:
    query, noun, levels, pool, options, (low, high) = spec
    attrs = _subset(rng, pool.split("|"), rng.randint(3, 5))
    brand = _brand(rng)
    lead = rng.choice(attrs)
    bullets = [f"{_title_case(a)}: {rng.choice(_DETAILS)}." for a in attrs]
    rest = [a for a in attrs if a != lead]
    description = f"This {noun} from {brand} is {lead}, with " + ", ".join(rest) + ". Order it with confidence."
    title = f"{brand} {_title_case(lead)} {_title_case(noun)}"
    text = " ".join([title, " ".join(bullets), description]).lower()
    chosen: dict[str, list[dict[str, Any]]] = {}
    for name, values in options.items():
        usable = [v for v in values if v not in text]
        picked = _subset(rng, usable, min(len(usable), rng.randint(2, 5)))
        if len(picked) >= 2:
            chosen[name.capitalize()] = [{"value": _title_case(v), "image": None} for v in picked]
    price = round(rng.uniform(low, high)) - rng.choice((0.01, 0.51, 0.05))
    return {
        "asin": asin, "name": title, "category": category, "query": query, "product_category": f"{root} › {levels}",
        "pricing": f"${price:.2f}", "full_description": description, "small_description": bullets,
        "customization_options": chosen, "images": [], "average_rating": None, "_attributes": attrs,
    }  # fmt: skip


def _goal(rng: random.Random, product: dict[str, Any], noun: str) -> dict[str, Any]:
    attrs = product["_attributes"]
    wanted = _subset(rng, attrs, rng.randint(1, min(3, len(attrs))))
    options = {name.lower(): rng.choice(values)["value"].lower() for name, values in product["customization_options"].items()}
    joined = wanted[0] if len(wanted) == 1 else ", ".join(wanted[:-1]) + " and " + wanted[-1]
    text = rng.choice(_OPENINGS).format(noun=noun, attrs=joined)
    if options:
        text += " with " + ", and ".join(f"{k}: {v}" for k, v in options.items())
    return {"asin": product["asin"], "instruction": text, "instruction_attributes": wanted,
            "instruction_options": list(options.values())}  # fmt: skip


def build() -> dict[str, Any]:
    """The four files' contents (decoded JSON), checked as the module docstring says."""
    rng = random.Random(SEED)
    products, nouns, pools = [], {}, {}
    asins: set[str] = set()
    for category, (root, types) in GRAMMAR.items():
        for spec in types:
            nouns[spec[0]], pools[spec[0]] = spec[1], spec[3].split("|")
            for _ in range(PRODUCTS_PER_TYPE):
                asin = "B0" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))
                while asin in asins:
                    asin = asin[:-1] + rng.choice("0123456789")
                asins.add(asin)
                products.append(_product(rng, asin, category, root, spec))
    rng.shuffle(products)  # items_shuffle: the catalogue in no particular order
    attributes = {p["asin"]: {"attributes": p.pop("_attributes")} for p in products}
    reviews = [{"asin": p["asin"], "average_rating": None,
                "reviews": [dict(zip(("title", "score", "body"), r)) for r in rng.sample(_REVIEWS, rng.randint(0, 3))]}
               for p in products]  # fmt: skip
    for entry in reviews:
        scores = [float(r["score"]) for r in entry["reviews"]]
        entry["average_rating"] = round(sum(scores) / len(scores), 1) if scores else None
    catalog = build_catalog(products, attributes, {}, reviews, source="generator")
    for product in catalog.products:  # a type attribute a product lacks never matches it
        own = set(product.attributes)
        stray = [a for a in pools[product.query] if a not in own and attribute_matched(product, a)]
        assert not stray, (product.asin, stray)
        for name, values in product.options:
            assert all(v not in product.text for v in values), (product.asin, name)
    index = SearchIndex(catalog.products)
    human: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    kept = 0
    while kept < GOALS:
        raw = products[rng.randrange(len(products))]
        goal = _goal(rng, {**raw, "_attributes": attributes[raw["asin"]]["attributes"]}, nouns[raw["query"]])
        if goal["instruction"] in seen:
            continue
        seen.add(goal["instruction"])
        mine = [*human.get(raw["asin"], []), goal]  # its position among the product's goals seeds its price limit
        trial = build_catalog([raw], attributes, {raw["asin"]: mine}, [], source="generator")
        (parsed,) = [g for g in trial.goals if goal_keywords(g) == goal["instruction"]]
        product = catalog.by_asin[raw["asin"]]
        chosen = [(n, next(v for v in vals if v in parsed.options)) for n, vals in product.options]
        assert score_purchase(product, parsed, chosen).score == 1.0, goal
        if raw["asin"] not in index.search(goal_keywords(parsed))[:10]:
            continue  # the key words do not find it on the first page
        human.setdefault(raw["asin"], []).append(goal)
        kept += 1
    return dict(zip(FILES, (products, attributes, human, reviews)))


def render(content: Any) -> str:
    """A file's JSON text: one top-level entry per line."""
    if isinstance(content, list):
        return "[\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in content) + "\n]\n"
    return "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in content.items()) + "\n}\n"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, content in build().items():
        path = OUT / f"{name}.gz"
        path.write_bytes(gzip.compress(render(content).encode("utf-8"), compresslevel=9, mtime=0))
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
