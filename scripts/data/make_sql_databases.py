"""Writes the five databases of arlkit's own SQL task set as SQL scripts
(``src/arlkit/data/sql/databases/<db>.sql.gz``): ``.venv/bin/python scripts/data/make_sql_databases.py``.

Each script (``CREATE TABLE`` + ``INSERT``) is a pure function of a fixed seed, drawn with
SplitMix64 (``scripts/data/splitmix.py``, so the output cannot change with the Python version). The
SHA-256 of every script is pinned in :data:`arlkit.envs.sql.databases.SCRIPT_SHA256`; the tests check
that the shipped files equal this output. At run time :mod:`arlkit.envs.sql.databases` builds the
SQLite files from the shipped scripts.

The databases and their sizes are listed in :mod:`arlkit.envs.sql.databases`.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))  # scripts/data/ when loaded by path (the tests' data_script)
from splitmix import SplitMix64  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "sql" / "databases"

FIRST = (
    "Ava Ben Chloe Daniel Elena Felix Grace Hugo Iris Jonas Kira Liam Maya Noah Olivia Pablo Quinn Rosa Samir "
    "Tara Umar Vera Wei Xenia Yusuf Zoe Amir Bianca Carlos Dana Emil Fatima Gabriel Hana Ivan Julia Kenji Lena "
    "Marco Nina Oscar Priya Rafael Sofia Tomas Uma Victor Wanda Yara Zane"
).split()
LAST = (
    "Adams Baker Costa Dubois Evans Fischer Garcia Hansen Ito Jensen Kowalski Lopez Moreau Novak Okafor Patel "
    "Quiroga Rossi Schmidt Tanaka Ueda Varga Weber Xu Yilmaz Zimmer Andersen Bauer Chen Diaz Eriksen Ferreira "
    "Gomez Horvat Ibrahim Johansson Kim Larsen Meyer Nakamura"
).split()
CITIES = (
    ("Lisbon", "Portugal"),
    ("Porto", "Portugal"),
    ("Madrid", "Spain"),
    ("Barcelona", "Spain"),
    ("Paris", "France"),
    ("Lyon", "France"),
    ("Berlin", "Germany"),
    ("Munich", "Germany"),
    ("Rome", "Italy"),
    ("Milan", "Italy"),
    ("Vienna", "Austria"),
    ("Prague", "Czechia"),
    ("Warsaw", "Poland"),
    ("Amsterdam", "Netherlands"),
    ("Oslo", "Norway"),
    ("Dublin", "Ireland"),
)
ADJ = (
    "Silent Golden Broken Hidden Electric Crimson Distant Frozen Wild Gentle Hollow Bright Velvet Iron Lonely "
    "Midnight Paper Scarlet Endless Quiet"
).split()
NOUN = (
    "River Garden Mirror Horizon Engine Harbor Forest Signal Winter Lantern Machine Island Shadow Voyage Letter "
    "Orchard Storm Kingdom Compass Window"
).split()

# Fixed vocabularies the task set refers to by name.
DEPARTMENTS = (
    ("Computer Science", "Turing Hall"),
    ("Mathematics", "Euler Hall"),
    ("Physics", "Curie Hall"),
    ("Biology", "Darwin Hall"),
    ("History", "Herodotus Hall"),
    ("Economics", "Smith Hall"),
    ("Philosophy", "Curie Hall"),
    ("Chemistry", "Darwin Hall"),
)
SEMESTERS = ("2022-Fall", "2023-Spring", "2023-Fall", "2024-Spring")
GRADES = ("A", "B", "C", "D", "F")
CATEGORIES = (
    "Books",
    "Electronics",
    "Garden",
    "Kitchen",
    "Music",
    "Office",
    "Outdoor",
    "Sports",
    "Toys",
    "Beauty",
)
ORDER_STATUS = ("delivered", "shipped", "pending", "cancelled")
AIRPORTS = (
    ("LIS", "Humberto Delgado", "Lisbon", "Portugal"),
    ("OPO", "Francisco Sa Carneiro", "Porto", "Portugal"),
    ("MAD", "Barajas", "Madrid", "Spain"),
    ("BCN", "El Prat", "Barcelona", "Spain"),
    ("CDG", "Charles de Gaulle", "Paris", "France"),
    ("ORY", "Orly", "Paris", "France"),
    ("LYS", "Saint-Exupery", "Lyon", "France"),
    ("BER", "Brandenburg", "Berlin", "Germany"),
    ("MUC", "Franz Josef Strauss", "Munich", "Germany"),
    ("FRA", "Frankfurt Main", "Frankfurt", "Germany"),
    ("FCO", "Fiumicino", "Rome", "Italy"),
    ("MXP", "Malpensa", "Milan", "Italy"),
    ("VIE", "Schwechat", "Vienna", "Austria"),
    ("PRG", "Vaclav Havel", "Prague", "Czechia"),
    ("WAW", "Chopin", "Warsaw", "Poland"),
    ("AMS", "Schiphol", "Amsterdam", "Netherlands"),
    ("OSL", "Gardermoen", "Oslo", "Norway"),
    ("DUB", "Dublin", "Dublin", "Ireland"),
    ("CPH", "Kastrup", "Copenhagen", "Denmark"),
    ("ARN", "Arlanda", "Stockholm", "Sweden"),
    ("HEL", "Vantaa", "Helsinki", "Finland"),
    ("ATH", "Eleftherios Venizelos", "Athens", "Greece"),
    ("ZRH", "Kloten", "Zurich", "Switzerland"),
    ("BRU", "Zaventem", "Brussels", "Belgium"),
)
AIRLINES = (
    ("Atlantic Air", "Portugal"),
    ("Iberian Wings", "Spain"),
    ("Gallic Express", "France"),
    ("Rhine Airways", "Germany"),
    ("Alpine Jet", "Austria"),
    ("Nordic Sky", "Norway"),
    ("Tiber Air", "Italy"),
    ("Celtic Connect", "Ireland"),
)
SEAT_CLASSES = ("economy", "premium", "business")
GENRES_BOOK = ("fiction", "mystery", "science", "history", "fantasy", "biography", "poetry", "travel")
MEMBERSHIPS = ("standard", "premium", "student")
BRANCHES = (
    ("Central", "Lisbon", 1931),
    ("Riverside", "Porto", 1978),
    ("Old Town", "Prague", 1902),
    ("Harbor", "Oslo", 1995),
    ("University", "Vienna", 1965),
    ("Garden", "Dublin", 2008),
)
GENRES_MUSIC = ("rock", "jazz", "pop", "electronic", "classical", "folk", "hip-hop", "blues")
LABELS = ("Northern Records", "Blue Room", "Sunset Tapes", "Vinyl House", "Echo Lane")


def _person(rng: SplitMix64, used: set[str]) -> str:
    while True:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if name not in used:
            used.add(name)
            return name


def _title(rng: SplitMix64, used: set[str], words: int = 2) -> str:
    while True:
        if words == 3 and rng.chance(0.5):
            title = f"{rng.choice(NOUN)} of the {rng.choice(NOUN)}"
        else:
            title = f"{'The ' if words == 3 else ''}{rng.choice(ADJ)} {rng.choice(NOUN)}"
        if title not in used:
            used.add(title)
            return title


def _money(cents: int) -> float:
    return round(cents / 100, 2)


Row = tuple[Any, ...]
Tables = list[tuple[str, str, list[Row]]]  # (name, CREATE TABLE body, rows)


def _university(rng: SplitMix64) -> Tables:
    departments = [
        (i + 1, name, building, rng.randint(20, 90) * 10_000) for i, (name, building) in enumerate(DEPARTMENTS)
    ]
    people: set[str] = set()
    instructors = [
        (i + 1, _person(rng, people), 1 + i % len(DEPARTMENTS), rng.randint(55, 160) * 1000, rng.randint(1990, 2023))
        for i in range(48)
    ]
    students = []
    for i in range(600):
        city = rng.choice(CITIES)[0]
        gpa = None if rng.chance(0.03) else round(rng.randint(180, 400) / 100, 2)
        students.append(
            (1001 + i, _person(rng, people), rng.randint(1, len(DEPARTMENTS)), rng.randint(1, 4), gpa, city)
        )
    titles: set[str] = set()
    subjects = ("Introduction to", "Advanced", "Topics in", "Seminar on", "Foundations of", "Applied")
    courses = []
    for i in range(72):
        dept = 1 + i % len(DEPARTMENTS)
        dept_instructors = [ins[0] for ins in instructors if ins[2] == dept]
        while True:
            title = f"{rng.choice(subjects)} {DEPARTMENTS[dept - 1][0]} {rng.randint(1, 9)}"
            if title not in titles:
                titles.add(title)
                break
        courses.append((f"C{100 + i}", title, dept, rng.choice((3, 4, 5, 6)), rng.choice(dept_instructors)))
    enrollments = []
    for student in students:
        taken: set[tuple[str, str]] = set()
        for _ in range(rng.randint(2, 8)):
            course = rng.choice(courses)[0]
            semester = rng.choice(SEMESTERS)
            if (course, semester) in taken:
                continue
            taken.add((course, semester))
            grade = None if semester == "2024-Spring" and rng.chance(0.6) else rng.weighted(GRADES, (30, 35, 20, 10, 5))
            enrollments.append((student[0], course, semester, grade))
    return [
        ("department", "dept_id INTEGER PRIMARY KEY, name TEXT NOT NULL, building TEXT, budget INTEGER", departments),
        (
            "instructor",
            "instructor_id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER REFERENCES department(dept_id), "
            "salary INTEGER, hire_year INTEGER",
            instructors,
        ),
        (
            "student",
            "student_id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER REFERENCES department(dept_id), "
            "year INTEGER, gpa REAL, home_city TEXT",
            students,
        ),
        (
            "course",
            "course_id TEXT PRIMARY KEY, title TEXT NOT NULL, dept_id INTEGER REFERENCES department(dept_id), "
            "credits INTEGER, instructor_id INTEGER REFERENCES instructor(instructor_id)",
            courses,
        ),
        (
            "enrollment",
            "student_id INTEGER REFERENCES student(student_id), course_id TEXT REFERENCES course(course_id), "
            "semester TEXT, grade TEXT, PRIMARY KEY (student_id, course_id, semester)",
            enrollments,
        ),
    ]


def _retail(rng: SplitMix64) -> Tables:
    people: set[str] = set()
    customers = []
    for i in range(400):
        name = _person(rng, people)
        city, country = rng.choice(CITIES)
        email = name.lower().replace(" ", ".") + f"{i}@example.com"
        customers.append((i + 1, name, email, city, country, rng.date("2019-01-01", "2023-12-31")))
    categories = [(i + 1, name) for i, name in enumerate(CATEGORIES)]
    names: set[str] = set()
    products = []
    for i in range(150):
        category = 1 + i % len(CATEGORIES)
        name = f"{_title(rng, names)} {CATEGORIES[category - 1].rstrip('s')}"
        products.append((i + 1, name, category, _money(rng.randint(299, 49999)), rng.randint(0, 500)))
    orders, items = [], []
    for i in range(1500):
        date = rng.date("2022-01-01", "2024-06-30")
        status = rng.weighted(ORDER_STATUS, (70, 12, 10, 8))
        orders.append((i + 1, rng.randint(1, len(customers)), date, status))
        chosen: set[int] = set()
        for _ in range(rng.randint(1, 4)):
            product = rng.choice(products)
            if product[0] in chosen:
                continue
            chosen.add(product[0])
            items.append((i + 1, product[0], rng.weighted((1, 2, 3, 4, 5), (50, 25, 12, 8, 5)), product[3]))
    return [
        (
            "customer",
            "customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, city TEXT, country TEXT, "
            "signup_date TEXT",
            customers,
        ),
        ("category", "category_id INTEGER PRIMARY KEY, name TEXT NOT NULL", categories),
        (
            "product",
            "product_id INTEGER PRIMARY KEY, name TEXT NOT NULL, category_id INTEGER REFERENCES category(category_id), "
            "price REAL, stock INTEGER",
            products,
        ),
        (
            "orders",
            "order_id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(customer_id), order_date TEXT, "
            "status TEXT",
            orders,
        ),
        (
            "order_item",
            "order_id INTEGER REFERENCES orders(order_id), product_id INTEGER REFERENCES product(product_id), "
            "quantity INTEGER, unit_price REAL, PRIMARY KEY (order_id, product_id)",
            items,
        ),
    ]


def _flights(rng: SplitMix64) -> Tables:
    airports = list(AIRPORTS)
    airlines = [(i + 1, name, country) for i, (name, country) in enumerate(AIRLINES)]
    flights = []
    for i in range(900):
        airline = rng.randint(1, len(airlines))
        origin = rng.choice(airports)[0]
        destination = origin
        while destination == origin:
            destination = rng.choice(airports)[0]
        distance = rng.randint(300, 3200)
        price = _money(4000 + distance * rng.randint(8, 20))
        seats = rng.choice((120, 150, 180, 220))
        flights.append(
            (
                i + 1,
                airline,
                f"{AIRLINES[airline - 1][0][:2].upper()}{100 + i}",
                origin,
                destination,
                rng.date("2024-01-01", "2024-12-31"),
                distance,
                seats,
                price,
            )
        )
    people: set[str] = set()
    passengers = [(i + 1, _person(rng, people), rng.choice(CITIES)[1], rng.randint(1940, 2008)) for i in range(700)]
    bookings: list[Row] = []
    pairs: set[tuple[int, int]] = set()
    for _ in range(3000):
        flight = rng.choice(flights)
        passenger = rng.randint(1, len(passengers))
        if (flight[0], passenger) in pairs:
            continue
        pairs.add((flight[0], passenger))
        seat_class = rng.weighted(SEAT_CLASSES, (75, 15, 10))
        factor = {"economy": 100, "premium": 160, "business": 300}[seat_class]
        bookings.append((len(bookings) + 1, flight[0], passenger, seat_class, _money(int(flight[8] * factor))))
    return [
        ("airport", "code TEXT PRIMARY KEY, name TEXT NOT NULL, city TEXT, country TEXT", airports),
        ("airline", "airline_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT", airlines),
        (
            "flight",
            "flight_id INTEGER PRIMARY KEY, airline_id INTEGER REFERENCES airline(airline_id), flight_number TEXT, "
            "origin TEXT REFERENCES airport(code), destination TEXT REFERENCES airport(code), departure_date TEXT, "
            "distance_km INTEGER, seats INTEGER, price REAL",
            flights,
        ),
        (
            "passenger",
            "passenger_id INTEGER PRIMARY KEY, name TEXT NOT NULL, nationality TEXT, birth_year INTEGER",
            passengers,
        ),
        (
            "booking",
            "booking_id INTEGER PRIMARY KEY, flight_id INTEGER REFERENCES flight(flight_id), "
            "passenger_id INTEGER REFERENCES passenger(passenger_id), seat_class TEXT, paid REAL",
            bookings,
        ),
    ]


def _library(rng: SplitMix64) -> Tables:
    branches = [(i + 1, name, city, year) for i, (name, city, year) in enumerate(BRANCHES)]
    people: set[str] = set()
    authors = [(i + 1, _person(rng, people), rng.randint(1850, 1995), rng.choice(CITIES)[1]) for i in range(90)]
    titles: set[str] = set()
    books = []
    for i in range(400):
        author = rng.randint(1, len(authors))
        year = max(authors[author - 1][2] + 20, rng.randint(1900, 2023))
        books.append(
            (
                i + 1,
                _title(rng, titles, words=3),
                author,
                rng.choice(GENRES_BOOK),
                min(year, 2023),
                rng.randint(90, 900),
                rng.randint(1, len(branches)),
            )
        )
    members = [
        (
            i + 1,
            _person(rng, people),
            rng.date("2015-01-01", "2023-12-31"),
            rng.weighted(MEMBERSHIPS, (60, 15, 25)),
            rng.choice(CITIES)[0],
        )
        for i in range(300)
    ]
    loans = []
    for i in range(2000):
        loan_date = rng.date("2023-01-01", "2024-05-31")
        if rng.chance(0.1):
            returned, fine = None, 0.0
        else:
            days = rng.weighted((7, 14, 21, 30, 45, 60), (15, 35, 25, 12, 8, 5))
            returned = _dt.date.fromordinal(_dt.date.fromisoformat(loan_date).toordinal() + days).isoformat()
            fine = _money(max(0, days - 30) * 25)
        loans.append((i + 1, rng.randint(1, len(books)), rng.randint(1, len(members)), loan_date, returned, fine))
    return [
        ("branch", "branch_id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, opened_year INTEGER", branches),
        ("author", "author_id INTEGER PRIMARY KEY, name TEXT NOT NULL, birth_year INTEGER, country TEXT", authors),
        (
            "book",
            "book_id INTEGER PRIMARY KEY, title TEXT NOT NULL, author_id INTEGER REFERENCES author(author_id), "
            "genre TEXT, published_year INTEGER, pages INTEGER, branch_id INTEGER REFERENCES branch(branch_id)",
            books,
        ),
        (
            "member",
            "member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, join_date TEXT, membership TEXT, city TEXT",
            members,
        ),
        (
            "loan",
            "loan_id INTEGER PRIMARY KEY, book_id INTEGER REFERENCES book(book_id), "
            "member_id INTEGER REFERENCES member(member_id), loan_date TEXT, return_date TEXT, fine REAL",
            loans,
        ),
    ]


def _music(rng: SplitMix64) -> Tables:
    names: set[str] = set()
    artists = []
    for i in range(60):
        while True:
            noun = rng.choice(NOUN)
            plural = noun + ("es" if noun.endswith("s") else "s")
            name = f"The {rng.choice(ADJ)} {plural}" if rng.chance(0.5) else f"{rng.choice(FIRST)} {noun}"
            if name not in names:
                names.add(name)
                break
        artists.append((i + 1, name, rng.choice(CITIES)[1], rng.randint(1960, 2018)))
    titles: set[str] = set()
    albums = []
    for i in range(180):
        artist = rng.randint(1, len(artists))
        year = rng.randint(artists[artist - 1][3], 2024)
        albums.append((i + 1, _title(rng, titles), artist, year, rng.choice(LABELS)))
    tracks: list[Row] = []
    track_titles: set[str] = set()
    for album in albums:
        genre = rng.choice(GENRES_MUSIC)
        for _ in range(rng.randint(6, 14)):
            if len(tracks) >= 1800:
                break
            title = (
                _title(rng, track_titles)
                if len(track_titles) < 390
                else f"{rng.choice(ADJ)} {rng.choice(NOUN)} {len(tracks)}"
            )
            tracks.append(
                (
                    len(tracks) + 1,
                    title,
                    album[0],
                    genre if rng.chance(0.8) else rng.choice(GENRES_MUSIC),
                    rng.randint(95, 480),
                    rng.randint(0, 2_000_000),
                )
            )
    people: set[str] = set()
    playlists = [
        (i + 1, f"{rng.choice(ADJ)} {rng.choice(('Mix', 'Hits', 'Session', 'Vibes'))} {i + 1}", _person(rng, people))
        for i in range(40)
    ]
    entries = []
    for playlist in playlists:
        chosen: set[int] = set()
        for position in range(1, rng.randint(10, 40) + 1):
            track = rng.randint(1, len(tracks))
            if track in chosen:
                continue
            chosen.add(track)
            entries.append((playlist[0], track, position))
    return [
        ("artist", "artist_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, formed_year INTEGER", artists),
        (
            "album",
            "album_id INTEGER PRIMARY KEY, title TEXT NOT NULL, artist_id INTEGER REFERENCES artist(artist_id), "
            "release_year INTEGER, label TEXT",
            albums,
        ),
        (
            "track",
            "track_id INTEGER PRIMARY KEY, title TEXT NOT NULL, album_id INTEGER REFERENCES album(album_id), "
            "genre TEXT, duration_s INTEGER, plays INTEGER",
            tracks,
        ),
        ("playlist", "playlist_id INTEGER PRIMARY KEY, name TEXT NOT NULL, owner TEXT", playlists),
        (
            "playlist_track",
            "playlist_id INTEGER REFERENCES playlist(playlist_id), track_id INTEGER REFERENCES track(track_id), "
            "position INTEGER, PRIMARY KEY (playlist_id, track_id)",
            entries,
        ),
    ]


_GENERATORS: dict[str, tuple[int, Callable[[SplitMix64], Tables]]] = {
    "university": (11, _university),
    "retail": (23, _retail),
    "flights": (37, _flights),
    "library": (41, _library),
    "music": (53, _music),
}

def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):  # pragma: no cover - not used by the generators
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def database_script(db_id: str) -> str:
    """The SQL script (schema and data) of database ``db_id``; deterministic."""
    if db_id not in _GENERATORS:
        raise ValueError(f"unknown database {db_id!r}; valid choices: {', '.join(_GENERATORS)}")
    seed, make = _GENERATORS[db_id]
    lines = []
    for name, body, rows in make(SplitMix64(seed)):
        lines.append(f"CREATE TABLE {name} ({body});")
        for start in range(0, len(rows), 200):
            chunk = rows[start : start + 200]
            values = ",\n".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in chunk)
            lines.append(f"INSERT INTO {name} VALUES\n{values};")
    return "\n".join(lines) + "\n"


def write_script(db_id: str, directory: Path = OUT) -> Path:
    """Write ``<db_id>.sql.gz`` (gzip without a timestamp, so the bytes are reproducible)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{db_id}.sql.gz"
    path.write_bytes(gzip.compress(database_script(db_id).encode("utf-8"), compresslevel=9, mtime=0))
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or list(_GENERATORS):
        print(f"wrote {write_script(name)}")
