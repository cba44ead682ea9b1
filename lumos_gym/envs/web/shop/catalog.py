"""The shop's products: the product record, the catalogue with its search, and a generator.

A :class:`Product` holds what WebShop's product file holds (``princeton-nlp/WebShop``,
``web_agent_site/engine/engine.py`` ``load_products``): a title, a category path
(``product_category``, parts joined by ``›``), the search ``query`` it was collected under, a
price (or a price range), a description, bullet features, hidden attributes, customization
options (``{option name: [values]}``), reviews with scores and an average rating.

:func:`generate_catalog` writes a shop of invented products from word lists written for this
project: 11 categories, 32 product kinds (dress shirts, running shoes, wireless earbuds, water
bottles, shampoo, protein bars, bed sheets, yoga mats, dog beds, gel pens...), each with its own
attribute pool (``machine wash``, ``non slip``, ``stainless steel``, ``gluten free``...), option
groups (color, size, capacity, flavor, scent, length...), price range, brands and phrases. The
words are chosen so that the reward's fuzzy matching never confuses two attributes of one kind
(no one's words are a subset of another's), nor two option values of one kind other than sizes
and ``black white`` / ``all black``: WebShop matches sizes fuzzily too (``x-large`` earns
``large``, ``6`` earns ``6.5``) and its colour normalisation makes both of those ``black``. No
product text mentions an attribute the product lacks (WebShop's attribute reward also searches
the title, features and description) or any option value, and titles, features and
descriptions carry no digits. The same ``(seed, num_products)`` always gives the same
catalogue, byte for byte.

:func:`validation_catalog` is the shop of the ``validation`` split: the catalogue of
:func:`generate_catalog` (the same products, in the same order) followed by one product for every
:data:`VALIDATION_SHARE` of them, drawn from a random stream of their own; those added products,
which no other shop holds, are the only targets of validation tasks
(:attr:`Catalog.validation_asins`).

:class:`Catalog` searches its products with BM25 (:mod:`lumos_gym.retrieval.bm25`) over the
title, description, features and option values, as WebShop's Lucene index covers the title,
description, first bullet point and options (``search_engine/convert_product_file_format.py``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from lumos_gym.errors import LumosGymError
from lumos_gym.retrieval.bm25 import get_index
from lumos_gym.retrieval.corpus import Corpus
from lumos_gym.retrieval.documents import Document

__all__ = [
    "KINDS",
    "SEARCH_RETURN_N",
    "Catalog",
    "Product",
    "ProductKind",
    "Review",
    "VALIDATION_SHARE",
    "asin_split",
    "generate_catalog",
    "validation_catalog",
]

#: Hits a search keeps (WebShop's ``SEARCH_RETURN_N``), shown 10 per page.
SEARCH_RETURN_N = 50
_TEST_BUCKETS = 5  # one product in five is a test target
VALIDATION_SHARE = 5
"""The validation shop adds one product of its own for every five of the train shop."""


@dataclass(frozen=True)
class Review:
    """One customer review.

    Attributes:
        score: stars, 1 to 5.
        title: the review's headline.
        body: the review text.
    """

    score: int
    title: str
    body: str


@dataclass(frozen=True)
class Product:
    """One product of the shop.

    Attributes:
        asin: the product id (``B0`` and 8 characters for generated products), upper case.
        title: the product name shown on pages.
        category: the shop department (``clothing``, ``beauty``...).
        product_category: the category path, parts joined by `` › ``.
        query: the search query the product belongs to (its kind), lower case.
        pricing: one price, or the low and high ends of a price range.
        price: the price charged at checkout (within ``pricing``).
        description: the long description.
        features: the bullet points.
        attributes: hidden attributes the reward checks (never shown on the item page).
        options: customization options, option name to values, in page order.
        reviews: customer reviews.
        rating: the average review score, or None when there is none.
        images: image URLs (a generated product has one served by the shop itself).
        brand: the maker.
    """

    asin: str
    title: str
    category: str
    product_category: str
    query: str
    pricing: tuple[float, ...]
    price: float
    description: str
    features: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reviews: tuple[Review, ...] = ()
    rating: float | None = None
    images: tuple[str, ...] = ()
    brand: str = ""

    @property
    def price_tag(self) -> str:
        """Return the price as pages show it: ``$12.99`` or ``$12.99 to $15.99``."""
        if len(self.pricing) >= 2:
            return f"${self.pricing[0]:.2f} to ${self.pricing[1]:.2f}"
        return f"${self.price:.2f}"

    @property
    def rating_text(self) -> str:
        """Return the rating as pages show it (``4.5`` or ``N.A.``, as WebShop writes none)."""
        return "N.A." if self.rating is None else f"{self.rating:.1f}"

    def search_text(self) -> str:
        """Return the text the search index holds besides the title."""
        options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in
                                self.options.items())
        return " ".join([self.description, *self.features, options])


class Catalog(Sequence[Product]):
    """The products of a shop, by asin, with BM25 search.

    Args:
        products: the products (asins must be unique).
        name: a label for provenance (``generated/seed=0/n=1000``, a file name).
        validation: the asins of the products only the validation shop holds (the targets of
            validation tasks; see :func:`validation_catalog`), none for other shops.

    Raises:
        LumosGymError: for an empty catalogue, a repeated asin, or a validation asin that is
            not in the catalogue.
    """

    def __init__(self, products: Sequence[Product], *, name: str = "catalog",
                 validation: Sequence[str] = ()) -> None:
        self._products = tuple(products)
        self.name = name
        if not self._products:
            raise LumosGymError(f"catalog {name!r} has no products")
        self._by_asin = {p.asin.upper(): p for p in self._products}
        if len(self._by_asin) != len(self._products):
            raise LumosGymError(f"catalog {name!r}: product asins are not unique")
        self.validation_asins = frozenset(a.upper() for a in validation)
        if not self.validation_asins <= self._by_asin.keys():
            raise LumosGymError(f"catalog {name!r}: validation asins that it does not hold")

    def __len__(self) -> int:
        return len(self._products)

    def __getitem__(self, index: Any) -> Any:
        return self._products[index]

    def __iter__(self) -> Iterator[Product]:
        return iter(self._products)

    def get(self, asin: str) -> Product | None:
        """Return the product of ``asin`` (any case), or None."""
        return self._by_asin.get(asin.strip().upper())

    @cached_property
    def corpus(self) -> Corpus:
        """Return the products as a retrieval corpus (document id = asin)."""
        return Corpus(
            [Document(title=p.title, text=p.search_text(), id=p.asin) for p in self._products],
            name=self.name,
        )

    @cached_property
    def _index(self) -> Any:
        return get_index(self.corpus)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[Product]:
        """Return up to ``k`` products matching ``query``, best BM25 score first."""
        if not query.strip():
            return []
        return [self._by_asin[doc.id.upper()] for doc, _ in self._index.search(query, k)]


def asin_split(asin: str) -> str:
    """Return the split whose tasks may target ``asin``: ``"test"`` for one product in five."""
    digest = hashlib.sha256(asin.upper().encode()).digest()
    return "test" if digest[0] % _TEST_BUCKETS == 0 else "train"


# ---------------------------------------------------------------------------------------------
# Word lists


@dataclass(frozen=True)
class ProductKind:
    """A kind of product the generator makes.

    Attributes:
        category: the department.
        path: the category path below the department's root.
        query: the kind as shoppers search for it (plural, lower case).
        nouns: title nouns.
        attributes: the attribute pool; no attribute's words are a subset of another's.
        options: option name to the pool of values; no value's words are a subset of another's.
        price: the low and high price.
        uses: what the product is for (phrases for descriptions and reviews).
    """

    category: str
    path: tuple[str, ...]
    query: str
    nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    price: tuple[float, float]
    uses: tuple[str, ...]


_ROOTS = {
    "clothing": "Clothing, Shoes & Jewelry",
    "shoes": "Clothing, Shoes & Jewelry",
    "electronics": "Electronics",
    "kitchen": "Home & Kitchen",
    "home": "Home & Kitchen",
    "beauty": "Beauty & Personal Care",
    "grocery": "Grocery & Gourmet Food",
    "sports": "Sports & Outdoors",
    "pets": "Pet Supplies",
    "office": "Office Products",
    "toys": "Toys & Games",
}
_TOPS = ("small", "medium", "large", "x-large", "xx-large")
_SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")


def _kind(
    category: str,
    path: str,
    query: str,
    nouns: str,
    attributes: str,
    options: Mapping[str, str],
    price: tuple[float, float],
    uses: str,
) -> ProductKind:
    """Build a kind from ``|``-separated word lists (the lists read better that way)."""
    return ProductKind(
        category=category,
        path=tuple(path.split("|")),
        query=query,
        nouns=tuple(nouns.split("|")),
        attributes=tuple(attributes.split("|")),
        options={name: tuple(values.split("|")) for name, values in options.items()},
        price=price,
        uses=tuple(uses.split("|")),
    )


KINDS: tuple[ProductKind, ...] = (
    # -- clothing
    _kind(
        "clothing",
        "Men|Clothing|Shirts|Dress Shirts",
        "men's dress shirts",
        "Dress Shirt|Button Down Shirt|Oxford Shirt",
        "machine wash|long sleeve|slim fit|wrinkle free|cotton blend|spread collar|stretch fabric",
        {"color": "white|light blue|navy|black|pink|gray|lavender", "size": "|".join(_TOPS)},
        (18, 49),
        "the office|weddings and formal events|business travel|job interviews",
    ),
    _kind(
        "clothing",
        "Women|Clothing|Tops, Tees & Blouses|Blouses",
        "women's tops and blouses",
        "Blouse|Tunic Top|Casual Top",
        "short sleeve|v neck|loose fit|hand wash|button front|chiffon fabric|ruffle hem",
        {"color": "black|white|wine red|floral blue|green|beige|coral", "size": "|".join(_TOPS)},
        (14, 39),
        "everyday wear|a day at work|brunch with friends|summer vacations",
    ),
    _kind(
        "clothing",
        "Women|Clothing|Active|Leggings",
        "women's leggings",
        "Leggings|Yoga Pants|Workout Tights",
        "high waist|tummy control|squat proof|moisture wicking|four way stretch|side pockets|"
        "brushed interior",
        {"color": "black|charcoal|navy|olive|burgundy|heather gray", "size": "|".join(_TOPS)},
        (15, 45),
        "yoga classes|running errands|gym sessions|long walks",
    ),
    _kind(
        "clothing",
        "Men|Clothing|Fashion Hoodies & Sweatshirts",
        "men's hoodies",
        "Hoodie|Pullover Hoodie|Zip Up Hoodie",
        "fleece lined|drawstring hood|kangaroo pocket|relaxed fit|machine wash|ribbed cuffs|"
        "heavyweight cotton",
        {"color": "black|gray|navy|forest green|maroon|sand", "size": "|".join(_TOPS)},
        (22, 59),
        "cool evenings|weekend lounging|outdoor games|travel days",
    ),
    # -- shoes
    _kind(
        "shoes",
        "Men|Shoes|Athletic|Running",
        "running shoes",
        "Running Shoes|Road Running Sneakers|Trainers",
        "breathable mesh|non slip|lightweight|arch support|memory foam|rubber sole|wide toe box",
        {"color": "black white|all black|gray|navy blue|red|teal", "size": "|".join(_SHOE_SIZES)},
        (35, 120),
        "daily runs|marathon training|the treadmill|long walks",
    ),
    _kind(
        "shoes",
        "Women|Shoes|Sandals|Flat Sandals",
        "women's sandals",
        "Sandals|Slide Sandals|Strappy Sandals",
        "open toe|ankle strap|cushioned footbed|faux leather|adjustable buckle|flat heel",
        {
            "color": "tan|black|white|silver|rose gold|cognac",
            "size": "5|5.5|6|6.5|7|7.5|8|8.5|9|10",
        },
        (19, 59),
        "beach days|summer outings|vacations|casual dinners",
    ),
    _kind(
        "shoes",
        "Men|Shoes|Boots|Work & Safety",
        "men's work boots",
        "Work Boots|Leather Boots|Safety Boots",
        "waterproof|steel toe|slip resistant|lace up|genuine leather|insulated lining",
        {"color": "brown|black|wheat|chestnut", "size": "8|8.5|9|9.5|10|10.5|11|11.5|12|13"},
        (60, 180),
        "construction sites|long shifts|hiking trails|winter chores",
    ),
    # -- electronics
    _kind(
        "electronics",
        "Headphones, Earbuds & Accessories|Earbuds",
        "wireless earbuds",
        "Wireless Earbuds|Bluetooth Earphones|True Wireless Headphones",
        "noise cancelling|charging case|water resistant|touch control|long battery life|"
        "built in microphone",
        {"color": "black|white|navy|rose|sage"},
        (25, 150),
        "commuting|workouts|phone calls|podcasts on the go",
    ),
    _kind(
        "electronics",
        "Cell Phones & Accessories|Cases, Holsters & Sleeves",
        "phone cases",
        "Phone Case|Protective Case|Slim Case",
        "shockproof|kickstand|card holder|raised edges|magsafe compatible|screen protector",
        {
            "color": "black|clear|midnight blue|lilac|forest green",
            "model": "iphone 15|galaxy s24|pixel 8|moto g power|oneplus 12",
        },
        (9, 35),
        "everyday protection|drops and bumps|travel|outdoor adventures",
    ),
    _kind(
        "electronics",
        "Computers & Accessories|Cables|USB Cables",
        "usb charging cables",
        "Charging Cable|Charger Cord|Phone Cable",
        "fast charging|braided nylon|usb c|tangle free|data transfer|reinforced connector",
        {"length": "3 ft|6 ft|10 ft", "color": "black|white|gray|blue"},
        (7, 25),
        "the nightstand|the car|the office desk|travel bags",
    ),
    _kind(
        "electronics",
        "Portable Audio & Video|Portable Speakers",
        "portable bluetooth speakers",
        "Portable Speaker|Bluetooth Speaker|Outdoor Speaker",
        "waterproof|stereo sound|deep bass|rechargeable battery|hands free calling|shock resistant",
        {"color": "black|ocean blue|red|camo|gray"},
        (25, 130),
        "pool parties|camping trips|the backyard|road trips",
    ),
    # -- kitchen
    _kind(
        "kitchen",
        "Kitchen & Dining|Water Bottles",
        "insulated water bottles",
        "Water Bottle|Insulated Bottle|Sports Bottle",
        "stainless steel|vacuum insulated|leak proof|bpa free|wide mouth|dishwasher safe|straw lid",
        {"capacity": "12 oz|18 oz|24 oz|32 oz|40 oz", "color": "black|white|teal|coral|navy"},
        (12, 45),
        "the gym|hiking|school|the office",
    ),
    _kind(
        "kitchen",
        "Kitchen & Dining|Cookware|Skillets",
        "frying pans",
        "Frying Pan|Skillet|Saute Pan",
        "non stick|oven safe|induction compatible|dishwasher safe|cast iron|glass lid",
        {"size": "8 inch|10 inch|12 inch", "color": "black|gray|red|cream"},
        (18, 90),
        "weeknight dinners|breakfast eggs|searing steaks|family meals",
    ),
    _kind(
        "kitchen",
        "Kitchen & Dining|Dining & Entertaining|Mugs",
        "coffee mugs",
        "Coffee Mug|Tea Cup|Mug",
        "ceramic|microwave safe|gift box|handmade|large handle|speckled glaze",
        {"capacity": "12 oz|16 oz|20 oz", "color": "white|black|sage|terracotta|sky blue"},
        (9, 32),
        "morning coffee|tea time|the office desk|gifts for friends",
    ),
    _kind(
        "kitchen",
        "Kitchen & Dining|Storage & Organization|Food Storage",
        "food storage containers",
        "Food Storage Containers|Meal Prep Containers",
        "airtight|bpa free|freezer safe|stackable|microwave safe|snap lock lids",
        {"size": "5 piece|10 piece|24 piece"},
        (15, 45),
        "meal prep|leftovers|school lunches|pantry organization",
    ),
    # -- beauty
    _kind(
        "beauty",
        "Hair Care|Shampoo & Conditioner|Shampoos",
        "shampoo",
        "Shampoo|Moisturizing Shampoo|Clarifying Shampoo",
        "sulfate free|paraben free|for dry hair|color safe|tea tree|argan oil",
        {"size": "8 fl oz|16 fl oz|33.8 fl oz", "scent": "lavender|coconut|unscented|citrus"},
        (8, 30),
        "daily washing|the shower|travel kits|salon care at home",
    ),
    _kind(
        "beauty",
        "Skin Care|Face|Creams & Moisturizers",
        "face moisturizers",
        "Face Moisturizer|Day Cream|Facial Lotion",
        "hyaluronic acid|fragrance free|oil free|sensitive skin|non comedogenic|vitamin c",
        {"size": "1.7 fl oz|2.5 fl oz|4 fl oz"},
        (12, 55),
        "morning routines|night routines|dry winter months|makeup prep",
    ),
    _kind(
        "beauty",
        "Foot, Hand & Nail Care|Nail Polish",
        "nail polish",
        "Nail Polish|Nail Lacquer|Gel Polish",
        "quick dry|long lasting|chip resistant|vegan|cruelty free|high shine",
        {"color": "ruby red|nude pink|coral|midnight blue|classic white|lilac"},
        (6, 22),
        "home manicures|special occasions|weekend pampering|gift sets",
    ),
    # -- grocery
    _kind(
        "grocery",
        "Snack Foods|Bars|Protein Bars",
        "protein bars",
        "Protein Bars|Snack Bars|Energy Bars",
        "gluten free|high protein|low sugar|non gmo|keto friendly|dairy free",
        {
            "flavor": "dark chocolate|almond butter|salted caramel|blueberry|cookie dough",
            "size": "12 count|24 count",
        },
        (15, 42),
        "post workout snacks|busy mornings|hiking trips|lunch boxes",
    ),
    _kind(
        "grocery",
        "Beverages|Coffee, Tea & Cocoa|Coffee|Whole Coffee Beans",
        "coffee beans",
        "Coffee Beans|Roasted Coffee|Coffee",
        "whole bean|organic|fair trade|dark roast|single origin|low acid",
        {"size": "12 ounce|2 pound|5 pound", "flavor": "original|hazelnut|vanilla|mocha"},
        (10, 48),
        "espresso drinks|french press brewing|cold brew|morning drip coffee",
    ),
    _kind(
        "grocery",
        "Beverages|Coffee, Tea & Cocoa|Tea|Herbal",
        "herbal tea",
        "Herbal Tea|Tea Bags|Loose Leaf Tea",
        "caffeine free|usda organic|individually wrapped|kosher|compostable bags",
        {
            "flavor": "peppermint|chamomile|green jasmine|earl grey|lemon ginger",
            "size": "20 count|50 count|100 count",
        },
        (6, 28),
        "quiet evenings|after dinner|cold days|the office pantry",
    ),
    # -- home
    _kind(
        "home",
        "Bedding|Sheets & Pillowcases|Sheet & Pillowcase Sets",
        "bed sheets",
        "Sheet Set|Bed Sheets|Bedding Set",
        "deep pocket|breathable|wrinkle resistant|egyptian cotton|microfiber|machine washable",
        {
            "size": "twin|full|queen|king|california king",
            "color": "white|gray|navy|sage green|ivory",
        },
        (22, 110),
        "guest rooms|hot sleepers|the master bedroom|dorm rooms",
    ),
    _kind(
        "home",
        "Home Decor|Wall Art|Posters & Prints",
        "wall art",
        "Canvas Wall Art|Framed Print|Wall Decor",
        "ready to hang|solid wood frame|canvas print|living room decor|bedroom decor|"
        "fade resistant",
        {
            "size": "12x16 inch|16x20 inch|24x36 inch",
            "color": "abstract|botanical|ocean|mountain|city skyline",
        },
        (25, 140),
        "the living room|bedroom walls|home offices|hallways",
    ),
    _kind(
        "home",
        "Furniture|Home Office Furniture|Chairs",
        "office chairs",
        "Office Chair|Desk Chair|Task Chair",
        "lumbar support|adjustable height|swivel|mesh back|padded armrests|rolling casters",
        {"color": "black|gray|white|blue"},
        (60, 250),
        "home offices|long work days|gaming setups|study rooms",
    ),
    # -- sports
    _kind(
        "sports",
        "Exercise & Fitness|Yoga|Yoga Mats",
        "yoga mats",
        "Yoga Mat|Exercise Mat|Workout Mat",
        "non slip|extra thick|eco friendly|carrying strap|alignment lines|tear resistant",
        {"color": "purple|black|teal|pink|gray", "thickness": "6mm|8mm|10mm"},
        (18, 70),
        "hot yoga|pilates|home workouts|stretching",
    ),
    _kind(
        "sports",
        "Outdoor Recreation|Camping & Hiking|Tents",
        "camping tents",
        "Camping Tent|Dome Tent|Backpacking Tent",
        "waterproof|easy setup|rainfly|two doors|mesh windows|carry bag",
        {"size": "2 person|4 person|6 person", "color": "green|orange|blue|gray"},
        (45, 260),
        "family camping|backpacking trips|music festivals|backyard nights",
    ),
    _kind(
        "sports",
        "Exercise & Fitness|Strength Training|Dumbbells",
        "dumbbells",
        "Dumbbells|Hand Weights|Dumbbell Set",
        "neoprene coated|hex shape|anti roll|ergonomic grip|odor free",
        {"size": "5 pounds|10 pounds|15 pounds|20 pounds", "color": "black|pink|blue|gray"},
        (15, 90),
        "home gyms|strength training|rehab exercises|toning workouts",
    ),
    # -- pets
    _kind(
        "pets",
        "Dogs|Beds & Furniture|Beds",
        "dog beds",
        "Dog Bed|Pet Bed|Dog Lounger",
        "orthopedic|washable cover|non skid bottom|memory foam|waterproof liner|bolster sides",
        {"size": "|".join(_TOPS[:4]), "color": "gray|brown|navy|beige"},
        (25, 120),
        "senior dogs|crates|living rooms|road trips",
    ),
    _kind(
        "pets",
        "Dogs|Treats|Jerky",
        "dog treats",
        "Dog Treats|Jerky Treats|Training Treats",
        "grain free|all natural|single ingredient|made in usa|soft chewy",
        {"flavor": "chicken|beef|salmon|duck|sweet potato", "size": "6 oz|12 oz|24 oz"},
        (8, 35),
        "training sessions|good behavior|long walks|daily rewards",
    ),
    # -- office
    _kind(
        "office",
        "Office & School Supplies|Paper|Notebooks & Writing Pads",
        "notebooks",
        "Notebook|Journal|Spiral Notebook",
        "college ruled|hardcover|acid free paper|lay flat|spiral bound|inner pocket",
        {"color": "black|red|teal|kraft brown|lavender", "size": "a5|b5|letter"},
        (6, 25),
        "class notes|bullet journaling|meetings|travel sketches",
    ),
    _kind(
        "office",
        "Office & School Supplies|Writing & Correction Supplies|Gel Pens",
        "gel pens",
        "Gel Pens|Rollerball Pens|Ink Pens",
        "quick drying|fine point|smooth writing|retractable|comfort grip|refillable",
        {"color": "black|blue|red", "size": "12 pack|24 pack|36 pack"},
        (6, 24),
        "note taking|signing documents|planners|the classroom",
    ),
    # -- toys
    _kind(
        "toys",
        "Puzzles|Jigsaw Puzzles",
        "jigsaw puzzles",
        "Jigsaw Puzzle|Puzzle|Family Puzzle",
        "thick pieces|glare free|poster included|matte finish|random cut",
        {
            "size": "500 pieces|1000 pieces|1500 pieces",
            "color": "landscape|animals|vintage map|flowers",
        },
        (10, 35),
        "family game nights|rainy afternoons|gifts for adults|quiet weekends",
    ),
)

_BRANDS = {
    "clothing": ("Northvale", "Harlow & Finch", "Quillmere", "Ambergate", "Tessaly", "Corvane"),
    "shoes": ("Stridewell", "Kestrel Run", "Pathora", "Ironmoor", "Solvia", "Brevik"),
    "electronics": ("Volteq", "Sonara", "Lumacore", "Pixwell", "Tunebright", "Zephro"),
    "kitchen": ("Hearthly", "Copperleaf", "Brewden", "Pantrix", "Oakhollow", "Silvane"),
    "beauty": ("Lumiere Botanics", "Velvessa", "Dewbloom", "Auralis", "Petalwise", "Clarelle"),
    "grocery": ("Grainfield", "Morrow Farms", "Bean & Bough", "Nutrava", "Sunhaven", "Kettlebrook"),
    "home": ("Linenwood", "Dovecote", "Hollis Home", "Maplecrest", "Sablewood", "Quietnest"),
    "sports": ("Trailcrest", "Flexora", "Summitly", "Ironleaf", "Zenfield", "Outbound Co"),
    "pets": ("Pawsome Den", "Barkwell", "Furlough", "Tailwind Pets", "Snoutly", "Kibbleton"),
    "office": ("Inkwell & Co", "Paperloft", "Scriptora", "Deskwise", "Noteworthy", "Penhallow"),
    "toys": ("Puzzlecraft", "Gamewright Lane", "Piecemeal", "Tinker Grove", "Joyloom", "Brainly"),
}
_TITLE_TAILS = (
    "for Men and Women",
    "Everyday Essential",
    "Classic Design",
    "Gift Idea",
    "Premium Quality",
    "Modern Style",
    "Value Pack",
    "New Edition",
)
_BENEFITS = (
    "Built to hold up to daily use without losing its shape or finish.",
    "Checked by hand before it leaves our workshop.",
    "A thoughtful gift for family, friends and coworkers.",
    "Backed by our friendly customer service team.",
    "Designed in our studio and tested by real customers.",
    "Easy to care for, so it stays like new for longer.",
    "Made with well chosen materials for a better feel.",
    "Packed in recyclable packaging.",
)
_OPENINGS = (
    "Meet the {brand} {noun}, made for {use}.",
    "The {brand} {noun} {is_} a dependable pick for {use}.",
    "Whether it is {use} or {use2}, {this} {noun} {is_} ready.",
    "{brand} designed {this} {noun} with {use} in mind.",
)
_REVIEW_TITLES = {
    5: ("Love it", "Exactly as described", "Would buy again", "Great value"),
    4: ("Very good", "Happy with it", "Solid choice"),
    3: ("It is okay", "Decent for the money", "Mixed feelings"),
    2: ("Not what I expected", "Could be better"),
    1: ("Disappointed", "Returned it"),
}
_REVIEW_BODIES = {
    5: ("I bought this {noun} for {use} and it has been perfect.",
        "Works great for {use}. My second one already."),
    4: ("Good {noun} for {use}, only wish it arrived sooner.",
        "Does the job well for {use}."),
    3: ("The {noun} is fine for {use} but nothing special.",
        "Average quality; it works for {use}."),
    2: ("Not great for {use}; the quality felt cheap.",),
    1: ("Did not work out for {use} at all.",),
}


def _asin(rng: random.Random, used: set[str]) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in used:
            used.add(asin)
            return asin


def _title_case(phrase: str) -> str:
    return " ".join(word if word.isupper() else word.capitalize() for word in phrase.split())


def _price(rng: random.Random, low: float, high: float) -> float:
    """A price ending in .99 or .49, between ``low`` and ``high``."""
    whole = rng.randint(int(low), int(high))
    return round(whole + rng.choice((0.99, 0.49, 0.99)), 2)


def _reviews(rng: random.Random, kind: ProductKind, noun: str) -> tuple[Review, ...]:
    reviews = []
    for _ in range(rng.choice((0, 1, 2, 3, 3, 4, 5))):
        score = rng.choices((5, 4, 3, 2, 1), weights=(45, 28, 14, 8, 5))[0]
        body = rng.choice(_REVIEW_BODIES[score])
        body = body.format(noun=noun.lower(), use=rng.choice(kind.uses))
        reviews.append(Review(score, rng.choice(_REVIEW_TITLES[score]), body))
    return tuple(reviews)


def _product(rng: random.Random, kind: ProductKind, asin: str) -> Product:
    brand = rng.choice(_BRANDS[kind.category])
    noun = rng.choice(kind.nouns)
    attributes = rng.sample(kind.attributes, rng.randint(3, min(5, len(kind.attributes))))
    shown = attributes[: rng.randint(1, 2)]
    head = f"{brand} " + " ".join(_title_case(a) for a in shown) + f" {noun}"
    title = f"{head}, {rng.choice(_TITLE_TAILS)}" if rng.random() < 0.5 else head
    uses = rng.sample(kind.uses, 2)
    plural = noun.endswith("s")
    opening = rng.choice(_OPENINGS).format(
        brand=brand, noun=noun.lower(), use=uses[0], use2=uses[1],
        this="these" if plural else "this", is_="are" if plural else "is",
    )
    details = "Key details: " + ", ".join(attributes) + "."
    description = " ".join([opening, details, rng.choice(_BENEFITS)])
    benefits = rng.sample(_BENEFITS, len(attributes))
    features = tuple(f"{a.upper()}: {b}" for a, b in zip(attributes, benefits, strict=True))
    options = {}
    for name, pool in kind.options.items():
        count = rng.randint(2, min(6, len(pool)))
        chosen = set(rng.sample(pool, count))
        options[name] = tuple(v for v in pool if v in chosen)
    price = _price(rng, *kind.price)
    reviews = _reviews(rng, kind, noun)
    rating = round(sum(r.score for r in reviews) / len(reviews), 1) if reviews else None
    return Product(
        asin=asin,
        title=title,
        category=kind.category,
        product_category=" › ".join((_ROOTS[kind.category], *kind.path)),
        query=kind.query,
        pricing=(price,),
        price=price,
        description=description,
        features=features,
        attributes=tuple(attributes),
        options=options,
        reviews=reviews,
        rating=rating,
        images=(f"/image/{asin}.svg",),
        brand=brand,
    )


def generate_catalog(seed: int = 0, num_products: int = 1000) -> Catalog:
    """Generate a shop of invented products.

    Args:
        seed: the seed; the same ``(seed, num_products)`` gives the same catalogue.
        num_products: how many products (kinds take turns, in a seeded order, so every kind
            has about ``num_products / len(KINDS)`` products).

    Returns:
        The catalogue, named ``generated/seed=<seed>/n=<num_products>``.

    Raises:
        ValueError: for fewer than one product.
    """
    if num_products < 1:
        raise ValueError(f"num_products must be >= 1, got {num_products}")
    rng = random.Random(f"webshop/catalog/{seed}")
    products = _draw_products(rng, num_products, set())
    return Catalog(products, name=f"generated/seed={seed}/n={num_products}")


def validation_catalog(seed: int = 0, num_products: int = 1000) -> Catalog:
    """Generate the shop of the ``validation`` split: the train shop and products of its own.

    Args:
        seed: the seed of the train shop (:func:`generate_catalog`).
        num_products: the size of the train shop; ``num_products // VALIDATION_SHARE`` products
            (at least one) are added after its products, from the random stream
            ``webshop/catalog/<seed>/validation``, with asins none of its products has.

    Returns:
        The catalogue, named ``generated/seed=<seed>/n=<num_products>+validation=<added>``;
        its :attr:`~Catalog.validation_asins` are the added products.
    """
    shop = generate_catalog(seed, num_products)
    rng = random.Random(f"webshop/catalog/{seed}/validation")
    added = _draw_products(rng, max(1, num_products // VALIDATION_SHARE), {p.asin for p in shop})
    return Catalog([*shop, *added], name=f"{shop.name}+validation={len(added)}",
                   validation=[p.asin for p in added])


def _draw_products(rng: random.Random, count: int, used: set[str]) -> list[Product]:
    """Draw ``count`` products, kinds taking turns in an order shuffled every round."""
    order = list(KINDS)
    products = []
    for i in range(count):
        if i % len(order) == 0:
            rng.shuffle(order)
        products.append(_product(rng, order[i % len(order)], _asin(rng, used)))
    return products
