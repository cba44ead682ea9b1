"""What the generated shop sells: its product kinds and the words its products are made of.

:data:`KINDS` holds 32 product kinds (dress shirts, running shoes, wireless earbuds, water
bottles, shampoo, protein bars, bed sheets, yoga mats, dog beds, gel pens...) in 11 categories,
each with its own attribute pool, option groups, price range and phrases; the brands of each
category and the phrases of titles, descriptions and reviews follow. These word lists were
written for this project; :func:`~lumos_gym.envs.web.shop.catalog.generate_catalog` draws its
products from them (see :mod:`~lumos_gym.envs.web.shop.catalog` for the rules the words keep).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["KINDS", "ProductKind"]


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

# ---------------------------------------------------------------------------------------------
# Brands and the phrases of titles, descriptions and reviews

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
