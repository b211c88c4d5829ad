"""Writes arlkit's SQL task set (``src/arlkit/data/sql/train.json`` and ``test.json``, Spider format).

Every task comes from a question template written here, instantiated with values that exist in
the generated databases (see ``arlkit.envs.sql.databases``). The split is decided per **template**
(``split_of("<db>:<key>")``), so two instances of one template (same question with another
constant) always land in the same split. Run ``.venv/bin/python scripts/data/make_sql_tasks.py``
after changing a template; the tests check that the shipped files equal this output.

Hardness follows the spirit of Spider's levels: ``easy`` one table and one condition or aggregate;
``medium`` a join, GROUP BY or ORDER BY ... LIMIT; ``hard`` a sub-query, HAVING or set operation;
``extra`` several of these together (multi-way joins with grouping, correlated sub-queries,
window functions).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arlkit.envs.splits import split_of
from arlkit.envs.sql.databases import ensure_databases

HERE = Path(__file__).resolve().parents[2] / "src" / "arlkit" / "data" / "sql"


@dataclass(frozen=True)
class Template:
    """A question template: ``question`` and ``query`` are ``str.format`` patterns over ``params``
    (a list of dicts, or a SQL query whose rows, by column name, are the parameter sets)."""

    key: str
    db: str
    hardness: str
    question: str
    query: str
    params: list[dict[str, Any]] | str | None = None


T = Template
TEMPLATES: list[Template] = [
    # ---------------------------------------------------------------- university
    T(
        "year_count",
        "university",
        "easy",
        "How many students are in year {y}?",
        "SELECT count(*) FROM student WHERE year = {y}",
        [{"y": 1}, {"y": 3}, {"y": 4}],
    ),
    T(
        "hired_after",
        "university",
        "easy",
        "List the names of the instructors hired after {yr}, in alphabetical order.",
        "SELECT name FROM instructor WHERE hire_year > {yr} ORDER BY name",
        [{"yr": 2015}, {"yr": 2020}],
    ),
    T(
        "max_gpa_city",
        "university",
        "easy",
        "What is the highest GPA of any student from {city}?",
        "SELECT max(gpa) FROM student WHERE home_city = '{city}'",
        [{"city": "Lisbon"}, {"city": "Oslo"}, {"city": "Rome"}],
    ),
    T(
        "dept_building",
        "university",
        "easy",
        "Which departments are located in {b}? Give their names.",
        "SELECT name FROM department WHERE building = '{b}'",
        [{"b": "Curie Hall"}, {"b": "Darwin Hall"}],
    ),
    T(
        "credit_courses",
        "university",
        "easy",
        "How many courses are worth {c} credits?",
        "SELECT count(*) FROM course WHERE credits = {c}",
        [{"c": 3}, {"c": 6}],
    ),
    T(
        "semester_enrollments",
        "university",
        "medium",
        "For each semester, how many enrollments are there? Show the semester and the count.",
        "SELECT semester, count(*) FROM enrollment GROUP BY semester",
    ),
    T(
        "avg_salary_dept",
        "university",
        "medium",
        "What is the average salary of the instructors of the {d} department?",
        "SELECT avg(i.salary) FROM instructor AS i JOIN department AS d ON i.dept_id = d.dept_id WHERE d.name = '{d}'",
        [{"d": "Physics"}, {"d": "History"}, {"d": "Economics"}],
    ),
    T(
        "courses_of_instructor",
        "university",
        "medium",
        "List the titles of the courses taught by {name}.",
        "SELECT c.title FROM course AS c JOIN instructor AS i ON c.instructor_id = i.instructor_id WHERE i.name = "
        "'{name}'",
        "SELECT name FROM instructor WHERE instructor_id IN (5, 17, 30)",
    ),
    T(
        "top_gpa",
        "university",
        "medium",
        "Which {k} students have the highest GPA? Give their names and GPAs, best first, ties broken by name.",
        "SELECT name, gpa FROM student WHERE gpa IS NOT NULL ORDER BY gpa DESC, name LIMIT {k}",
        [{"k": 5}, {"k": 10}],
    ),
    T(
        "students_per_dept",
        "university",
        "medium",
        "How many students major in each department? Show the department name and the number of students.",
        "SELECT d.name, count(*) FROM student AS s JOIN department AS d ON s.dept_id = d.dept_id GROUP BY d.name",
    ),
    T(
        "never_grade",
        "university",
        "hard",
        "How many students have never received the grade {g}?",
        "SELECT count(*) FROM student WHERE student_id NOT IN (SELECT student_id FROM enrollment WHERE grade = '{g}')",
        [{"g": "F"}, {"g": "D"}],
    ),
    T(
        "dept_avg_gpa_above",
        "university",
        "hard",
        "Which departments have an average student GPA above {x}? Give the department names.",
        "SELECT d.name FROM department AS d JOIN student AS s ON s.dept_id = d.dept_id GROUP BY d.dept_id, d.name "
        "HAVING avg(s.gpa) > {x}",
        [{"x": 2.9}, {"x": 2.95}],
    ),
    T(
        "busy_courses",
        "university",
        "hard",
        "Which courses had more than {n} enrollments in the {sem} semester? Give the course ids in ascending order.",
        "SELECT course_id FROM enrollment WHERE semester = '{sem}' GROUP BY course_id HAVING count(*) > {n} ORDER BY "
        "course_id",
        [{"n": 12, "sem": "2023-Fall"}, {"n": 13, "sem": "2022-Fall"}],
    ),
    T(
        "both_semesters",
        "university",
        "hard",
        "How many students were enrolled in at least one course in both the {a} and the {b} semesters?",
        "SELECT count(*) FROM (SELECT student_id FROM enrollment WHERE semester = '{a}' "
        "INTERSECT SELECT student_id FROM enrollment WHERE semester = '{b}')",
        [{"a": "2022-Fall", "b": "2024-Spring"}, {"a": "2023-Spring", "b": "2023-Fall"}],
    ),
    T(
        "best_paid_per_dept",
        "university",
        "extra",
        "For each department, who is its best-paid instructor? Show the department name, the instructor name and the "
        "salary, ordered by department name.",
        "SELECT d.name, i.name, i.salary FROM instructor AS i JOIN department AS d ON i.dept_id = d.dept_id "
        "WHERE i.salary = (SELECT max(salary) FROM instructor WHERE dept_id = i.dept_id) ORDER BY d.name, i.name",
    ),
    T(
        "a_outside_major",
        "university",
        "extra",
        "How many distinct students earned an A in a course offered by a department other than their own major?",
        "SELECT count(DISTINCT s.student_id) FROM student AS s JOIN enrollment AS e ON e.student_id = s.student_id "
        "JOIN course AS c ON c.course_id = e.course_id WHERE e.grade = 'A' AND c.dept_id <> s.dept_id",
    ),
    T(
        "above_dept_avg",
        "university",
        "extra",
        "List the names and GPAs of the {d} students whose GPA is above the average GPA of their department, highest "
        "GPA first and ties by name.",
        "SELECT s.name, s.gpa FROM student AS s JOIN department AS d ON s.dept_id = d.dept_id WHERE d.name = '{d}' "
        "AND s.gpa > (SELECT avg(gpa) FROM student WHERE dept_id = s.dept_id) ORDER BY s.gpa DESC, s.name",
        [{"d": "Philosophy"}, {"d": "Chemistry"}],
    ),
    T(
        "credits_per_student_rank",
        "university",
        "extra",
        "Which {k} students have collected the most credits from courses graded A or B? Show name and total credits, "
        "most first, ties by name.",
        "SELECT s.name, sum(c.credits) AS total FROM student AS s JOIN enrollment AS e ON e.student_id = s.student_id "
        "JOIN course AS c ON c.course_id = e.course_id WHERE e.grade IN ('A', 'B') GROUP BY s.student_id, s.name "
        "ORDER BY total DESC, s.name LIMIT {k}",
        [{"k": 3}, {"k": 8}],
    ),
    T(
        "instructors_in_dept",
        "university",
        "medium",
        "How many instructors work in the {d} department?",
        "SELECT count(*) FROM instructor AS i JOIN department AS d ON i.dept_id = d.dept_id WHERE d.name = '{d}'",
        [{"d": "Mathematics"}, {"d": "Biology"}],
    ),
    T(
        "avg_credits",
        "university",
        "easy",
        "What is the average number of credits of a course?",
        "SELECT avg(credits) FROM course",
    ),
    T(
        "grade_distribution",
        "university",
        "medium",
        "How many enrollments of the {sem} semester received each grade? Show the grade and the count, ordered by "
        "grade; "
        "leave out enrollments without a grade.",
        "SELECT grade, count(*) FROM enrollment WHERE semester = '{sem}' AND grade IS NOT NULL GROUP BY grade ORDER BY "
        "grade",
        [{"sem": "2023-Spring"}, {"sem": "2024-Spring"}],
    ),
    T(
        "not_enrolled_sem",
        "university",
        "hard",
        "How many year-{y} students are not enrolled in any course in the {sem} semester?",
        "SELECT count(*) FROM student WHERE year = {y} AND student_id NOT IN "
        "(SELECT student_id FROM enrollment WHERE semester = '{sem}')",
        [{"y": 2, "sem": "2023-Fall"}, {"y": 4, "sem": "2022-Fall"}],
    ),
    T(
        "home_cities_dept",
        "university",
        "medium",
        "From how many different home cities do the students of the {d} department come?",
        "SELECT count(DISTINCT s.home_city) FROM student AS s JOIN department AS d ON s.dept_id = d.dept_id WHERE "
        "d.name = '{d}'",
        [{"d": "History"}, {"d": "Physics"}],
    ),
    # ---------------------------------------------------------------- retail
    T(
        "customers_country",
        "retail",
        "easy",
        "How many customers live in {c}?",
        "SELECT count(*) FROM customer WHERE country = '{c}'",
        [{"c": "Italy"}, {"c": "Norway"}, {"c": "Spain"}],
    ),
    T(
        "low_stock",
        "retail",
        "easy",
        "List the names of the products with fewer than {n} units in stock.",
        "SELECT name FROM product WHERE stock < {n}",
        [{"n": 10}, {"n": 25}],
    ),
    T(
        "orders_status",
        "retail",
        "easy",
        "How many orders have the status '{s}'?",
        "SELECT count(*) FROM orders WHERE status = '{s}'",
        [{"s": "cancelled"}, {"s": "pending"}, {"s": "shipped"}],
    ),
    T("avg_price", "retail", "easy", "What is the average price of all products?", "SELECT avg(price) FROM product"),
    T(
        "signups_year",
        "retail",
        "easy",
        "How many customers signed up in {y}?",
        "SELECT count(*) FROM customer WHERE signup_date LIKE '{y}-%'",
        [{"y": 2020}, {"y": 2023}],
    ),
    T(
        "products_in_category",
        "retail",
        "medium",
        "How many products are in the {cat} category?",
        "SELECT count(*) FROM product AS p JOIN category AS c ON p.category_id = c.category_id WHERE c.name = '{cat}'",
        [{"cat": "Toys"}, {"cat": "Kitchen"}],
    ),
    T(
        "top_cities",
        "retail",
        "medium",
        "Which {k} cities have the most customers? Give the city and its number of customers, most first, ties by "
        "city.",
        "SELECT city, count(*) AS n FROM customer GROUP BY city ORDER BY n DESC, city LIMIT {k}",
        [{"k": 3}, {"k": 5}],
    ),
    T(
        "qty_sold_product",
        "retail",
        "medium",
        "What is the total quantity sold of the product '{name}'?",
        "SELECT sum(oi.quantity) FROM order_item AS oi JOIN product AS p ON oi.product_id = p.product_id WHERE p.name "
        "= '{name}'",
        "SELECT name FROM product WHERE product_id IN (12, 47, 98)",
    ),
    T(
        "orders_city_year",
        "retail",
        "medium",
        "How many orders did customers from {city} place in {y}?",
        "SELECT count(*) FROM orders AS o JOIN customer AS c ON o.customer_id = c.customer_id "
        "WHERE c.city = '{city}' AND strftime('%Y', o.order_date) = '{y}'",
        [{"city": "Paris", "y": "2023"}, {"city": "Milan", "y": "2022"}],
    ),
    T(
        "status_histogram",
        "retail",
        "medium",
        "Show the number of orders for each status, most frequent status first.",
        "SELECT status, count(*) AS n FROM orders GROUP BY status ORDER BY n DESC",
    ),
    T(
        "revenue_year",
        "retail",
        "hard",
        "What is the total revenue (quantity times unit price) of the delivered orders placed in {y}, rounded to 2 "
        "decimals?",
        "SELECT round(sum(oi.quantity * oi.unit_price), 2) FROM order_item AS oi JOIN orders AS o ON o.order_id = "
        "oi.order_id "
        "WHERE o.status = 'delivered' AND o.order_date LIKE '{y}-%'",
        [{"y": 2022}, {"y": 2023}],
    ),
    T(
        "no_orders",
        "retail",
        "hard",
        "How many customers have never placed an order?",
        "SELECT count(*) FROM customer WHERE customer_id NOT IN (SELECT customer_id FROM orders)",
    ),
    T(
        "category_revenue_above",
        "retail",
        "hard",
        "Which categories have sold goods worth more than {x} in total (quantity times unit price)? Give their names.",
        "SELECT c.name FROM category AS c JOIN product AS p ON p.category_id = c.category_id "
        "JOIN order_item AS oi ON oi.product_id = p.product_id GROUP BY c.category_id, c.name "
        "HAVING sum(oi.quantity * oi.unit_price) > {x}",
        [{"x": 200000}, {"x": 175000}],
    ),
    T(
        "never_ordered_year",
        "retail",
        "hard",
        "Which products were never ordered in {y}? List their names alphabetically.",
        "SELECT name FROM product WHERE product_id NOT IN (SELECT oi.product_id FROM order_item AS oi "
        "JOIN orders AS o ON o.order_id = oi.order_id WHERE o.order_date LIKE '{y}-%') ORDER BY name",
        [{"y": 2024}],
    ),
    T(
        "cancelled_only",
        "retail",
        "hard",
        "How many customers have placed cancelled orders but no delivered order?",
        "SELECT count(*) FROM (SELECT customer_id FROM orders WHERE status = 'cancelled' "
        "EXCEPT SELECT customer_id FROM orders WHERE status = 'delivered')",
    ),
    T(
        "top_spenders",
        "retail",
        "extra",
        "Who are the {k} customers with the highest total spending on delivered orders? Show name and total rounded to "
        "2 "
        "decimals, highest first.",
        "SELECT c.name, round(sum(oi.quantity * oi.unit_price), 2) AS total FROM customer AS c "
        "JOIN orders AS o ON o.customer_id = c.customer_id JOIN order_item AS oi ON oi.order_id = o.order_id "
        "WHERE o.status = 'delivered' GROUP BY c.customer_id, c.name ORDER BY total DESC, c.name LIMIT {k}",
        [{"k": 5}, {"k": 10}],
    ),
    T(
        "busiest_month",
        "retail",
        "extra",
        "In which month of {y} were the most orders placed? Answer with the month as YYYY-MM and the number of orders.",
        "SELECT substr(order_date, 1, 7) AS month, count(*) AS n FROM orders WHERE order_date LIKE '{y}-%' "
        "GROUP BY month ORDER BY n DESC, month LIMIT 1",
        [{"y": 2022}, {"y": 2023}],
    ),
    T(
        "country_category_best",
        "retail",
        "extra",
        "For customers in {c}, what was the best-selling category by quantity? Give the category name and the "
        "quantity.",
        "SELECT cat.name, sum(oi.quantity) AS q FROM customer AS cu JOIN orders AS o ON o.customer_id = cu.customer_id "
        "JOIN order_item AS oi ON oi.order_id = o.order_id JOIN product AS p ON p.product_id = oi.product_id "
        "JOIN category AS cat ON cat.category_id = p.category_id WHERE cu.country = '{c}' "
        "GROUP BY cat.category_id, cat.name ORDER BY q DESC, cat.name LIMIT 1",
        [{"c": "France"}, {"c": "Poland"}],
    ),
    T(
        "orders_of_customer",
        "retail",
        "medium",
        "How many orders has {name} placed?",
        "SELECT count(*) FROM orders AS o JOIN customer AS c ON o.customer_id = c.customer_id WHERE c.name = '{name}'",
        "SELECT name FROM customer WHERE customer_id IN (7, 150, 333)",
    ),
    T(
        "price_between",
        "retail",
        "easy",
        "How many products cost between {a} and {b} (inclusive)?",
        "SELECT count(*) FROM product WHERE price BETWEEN {a} AND {b}",
        [{"a": 50, "b": 100}, {"a": 300, "b": 400}],
    ),
    T(
        "avg_lines_per_order",
        "retail",
        "hard",
        "On average, how many different products does an order contain? Round to 2 decimals.",
        "SELECT round(avg(n), 2) FROM (SELECT count(*) AS n FROM order_item GROUP BY order_id)",
    ),
    T(
        "expensive_products",
        "retail",
        "easy",
        "List the names and prices of the {k} most expensive products, most expensive first.",
        "SELECT name, price FROM product ORDER BY price DESC, name LIMIT {k}",
        [{"k": 3}, {"k": 5}],
    ),
    # ---------------------------------------------------------------- flights
    T(
        "departures_from",
        "flights",
        "easy",
        "How many flights depart from the airport {code}?",
        "SELECT count(*) FROM flight WHERE origin = '{code}'",
        [{"code": "CDG"}, {"code": "LIS"}, {"code": "VIE"}],
    ),
    T(
        "airports_in_country",
        "flights",
        "easy",
        "List the codes of the airports in {c}, in alphabetical order.",
        "SELECT code FROM airport WHERE country = '{c}' ORDER BY code",
        [{"c": "France"}, {"c": "Germany"}],
    ),
    T(
        "longest_distance",
        "flights",
        "easy",
        "What is the longest flight distance in kilometres?",
        "SELECT max(distance_km) FROM flight",
    ),
    T(
        "born_before",
        "flights",
        "easy",
        "How many passengers were born before {y}?",
        "SELECT count(*) FROM passenger WHERE birth_year < {y}",
        [{"y": 1950}, {"y": 1970}],
    ),
    T(
        "airline_flights",
        "flights",
        "medium",
        "How many flights does {a} operate?",
        "SELECT count(*) FROM flight AS f JOIN airline AS a ON f.airline_id = a.airline_id WHERE a.name = '{a}'",
        [{"a": "Nordic Sky"}, {"a": "Tiber Air"}],
    ),
    T(
        "biggest_airline",
        "flights",
        "medium",
        "Which airline operates the most flights? Give its name.",
        "SELECT a.name FROM airline AS a JOIN flight AS f ON f.airline_id = a.airline_id GROUP BY a.airline_id, a.name "
        "ORDER BY count(*) DESC, a.name LIMIT 1",
    ),
    T(
        "avg_price_from_city",
        "flights",
        "medium",
        "What is the average price of the flights departing from {city}, rounded to 2 decimals?",
        "SELECT round(avg(f.price), 2) FROM flight AS f JOIN airport AS ap ON f.origin = ap.code WHERE ap.city = "
        "'{city}'",
        [{"city": "Paris"}, {"city": "Madrid"}],
    ),
    T(
        "business_month",
        "flights",
        "medium",
        "How many business-class bookings are there on flights departing in {month} 2024?",
        "SELECT count(*) FROM booking AS b JOIN flight AS f ON b.flight_id = f.flight_id "
        "WHERE b.seat_class = 'business' AND strftime('%m', f.departure_date) = '{m}'",
        [{"month": "March", "m": "03"}, {"month": "October", "m": "10"}],
    ),
    T(
        "destinations_from",
        "flights",
        "medium",
        "Which airports can be reached by a direct flight from {code}? Give the distinct destination codes in "
        "alphabetical order.",
        "SELECT DISTINCT destination FROM flight WHERE origin = '{code}' ORDER BY destination",
        [{"code": "OSL"}, {"code": "DUB"}],
    ),
    T(
        "frequent_flyers",
        "flights",
        "hard",
        "Which passengers have more than {n} bookings? List their names alphabetically.",
        "SELECT p.name FROM passenger AS p JOIN booking AS b ON b.passenger_id = p.passenger_id "
        "GROUP BY p.passenger_id, p.name HAVING count(*) > {n} ORDER BY p.name",
        [{"n": 8}, {"n": 9}],
    ),
    T(
        "unbooked_flights",
        "flights",
        "hard",
        "How many flights have no bookings at all?",
        "SELECT count(*) FROM flight WHERE flight_id NOT IN (SELECT flight_id FROM booking)",
    ),
    T(
        "countries_many_departures",
        "flights",
        "hard",
        "Which countries have airports with more than {n} departing flights in total? Give the country names.",
        "SELECT ap.country FROM airport AS ap JOIN flight AS f ON f.origin = ap.code GROUP BY ap.country HAVING "
        "count(*) > {n}",
        [{"n": 60}, {"n": 80}],
    ),
    T(
        "pricier_than_avg",
        "flights",
        "hard",
        "How many flights from {code} cost more than the average price of all flights?",
        "SELECT count(*) FROM flight WHERE origin = '{code}' AND price > (SELECT avg(price) FROM flight)",
        [{"code": "FCO"}, {"code": "AMS"}],
    ),
    T(
        "airline_revenue",
        "flights",
        "extra",
        "For each airline, show its name, the number of bookings on its flights and the total amount paid rounded to 2 "
        "decimals, highest total first.",
        "SELECT a.name, count(*), round(sum(b.paid), 2) AS total FROM airline AS a JOIN flight AS f ON f.airline_id = "
        "a.airline_id "
        "JOIN booking AS b ON b.flight_id = f.flight_id GROUP BY a.airline_id, a.name ORDER BY total DESC",
    ),
    T(
        "country_to_country",
        "flights",
        "extra",
        "List the flight numbers of all flights from {a} to {b}, ordered by departure date and then flight number.",
        "SELECT f.flight_number FROM flight AS f JOIN airport AS o ON f.origin = o.code JOIN airport AS d ON "
        "f.destination = d.code "
        "WHERE o.country = '{a}' AND d.country = '{b}' ORDER BY f.departure_date, f.flight_number",
        [{"a": "Spain", "b": "Germany"}, {"a": "Italy", "b": "France"}],
    ),
    T(
        "top_payer",
        "flights",
        "extra",
        "Which passenger paid the most in total for bookings? Give the name and the total rounded to 2 decimals.",
        "SELECT p.name, round(sum(b.paid), 2) AS total FROM passenger AS p JOIN booking AS b ON b.passenger_id = "
        "p.passenger_id "
        "GROUP BY p.passenger_id, p.name ORDER BY total DESC, p.name LIMIT 1",
    ),
    T(
        "load_factor",
        "flights",
        "extra",
        "Which {k} flights have the highest share of their seats booked? Give the flight number and the number of "
        "bookings, highest share first and ties by flight number.",
        "SELECT f.flight_number, count(*) AS n FROM flight AS f JOIN booking AS b ON b.flight_id = f.flight_id "
        "GROUP BY f.flight_id, f.flight_number, f.seats ORDER BY 1.0 * count(*) / f.seats DESC, f.flight_number LIMIT "
        "{k}",
        [{"k": 3}, {"k": 5}],
    ),
    T(
        "passengers_nationality",
        "flights",
        "easy",
        "How many passengers have {c} nationality?",
        "SELECT count(*) FROM passenger WHERE nationality = '{c}'",
        [{"c": "Portugal"}, {"c": "Austria"}],
    ),
    T(
        "class_counts",
        "flights",
        "medium",
        "How many bookings are there in each seat class? Show the class and the count, most bookings first.",
        "SELECT seat_class, count(*) AS n FROM booking GROUP BY seat_class ORDER BY n DESC",
    ),
    T(
        "distinct_routes",
        "flights",
        "hard",
        "How many distinct routes (origin and destination pairs) does {a} fly?",
        "SELECT count(*) FROM (SELECT DISTINCT f.origin, f.destination FROM flight AS f JOIN airline AS a "
        "ON f.airline_id = a.airline_id WHERE a.name = '{a}')",
        [{"a": "Atlantic Air"}, {"a": "Alpine Jet"}],
    ),
    T(
        "youngest_passengers_route",
        "flights",
        "extra",
        "Which passengers born after {y} flew from {code}? List their distinct names alphabetically.",
        "SELECT DISTINCT p.name FROM passenger AS p JOIN booking AS b ON b.passenger_id = p.passenger_id "
        "JOIN flight AS f ON f.flight_id = b.flight_id WHERE p.birth_year > {y} AND f.origin = '{code}' ORDER BY "
        "p.name",
        [{"y": 2000, "code": "MAD"}, {"y": 2003, "code": "CDG"}],
    ),
    # ---------------------------------------------------------------- library
    T(
        "genre_count",
        "library",
        "easy",
        "How many books are in the {g} genre?",
        "SELECT count(*) FROM book WHERE genre = '{g}'",
        [{"g": "poetry"}, {"g": "travel"}, {"g": "mystery"}],
    ),
    T(
        "members_city_type",
        "library",
        "easy",
        "List the names of the members with a {t} membership who live in {city}, in alphabetical order.",
        "SELECT name FROM member WHERE membership = '{t}' AND city = '{city}' ORDER BY name",
        [{"t": "student", "city": "Berlin"}, {"t": "premium", "city": "Madrid"}],
    ),
    T(
        "most_pages",
        "library",
        "easy",
        "What is the title of the book with the most pages?",
        "SELECT title FROM book ORDER BY pages DESC, title LIMIT 1",
    ),
    T(
        "open_loans",
        "library",
        "easy",
        "How many loans have not been returned yet?",
        "SELECT count(*) FROM loan WHERE return_date IS NULL",
    ),
    T(
        "authors_country",
        "library",
        "easy",
        "How many authors come from {c}?",
        "SELECT count(*) FROM author WHERE country = '{c}'",
        [{"c": "Germany"}, {"c": "Ireland"}],
    ),
    T(
        "books_in_branch",
        "library",
        "medium",
        "How many books does the {b} branch hold?",
        "SELECT count(*) FROM book AS bk JOIN branch AS br ON bk.branch_id = br.branch_id WHERE br.name = '{b}'",
        [{"b": "Harbor"}, {"b": "Old Town"}],
    ),
    T(
        "books_by_author",
        "library",
        "medium",
        "How many books has {name} written?",
        "SELECT count(*) FROM book AS b JOIN author AS a ON b.author_id = a.author_id WHERE a.name = '{name}'",
        "SELECT name FROM author WHERE author_id IN (4, 22, 61)",
    ),
    T(
        "fines_year",
        "library",
        "medium",
        "What is the total of the fines on loans that started in {y}?",
        "SELECT sum(fine) FROM loan WHERE loan_date LIKE '{y}-%'",
        [{"y": 2023}, {"y": 2024}],
    ),
    T(
        "loans_per_membership",
        "library",
        "medium",
        "How many loans were made by members of each membership type? Show the type and the number of loans.",
        "SELECT m.membership, count(*) FROM loan AS l JOIN member AS m ON l.member_id = m.member_id GROUP BY "
        "m.membership",
    ),
    T(
        "multi_genre_authors",
        "library",
        "hard",
        "Which authors have written books in more than {n} different genres? List their names alphabetically.",
        "SELECT a.name FROM author AS a JOIN book AS b ON b.author_id = a.author_id GROUP BY a.author_id, a.name "
        "HAVING count(DISTINCT b.genre) > {n} ORDER BY a.name",
        [{"n": 4}, {"n": 5}],
    ),
    T(
        "no_loan_year",
        "library",
        "hard",
        "How many members did not borrow any book in {y}?",
        "SELECT count(*) FROM member WHERE member_id NOT IN (SELECT member_id FROM loan WHERE loan_date LIKE '{y}-%')",
        [{"y": 2024}],
    ),
    T(
        "never_loaned_books",
        "library",
        "hard",
        "Which books have never been loaned? List their titles alphabetically.",
        "SELECT title FROM book WHERE book_id NOT IN (SELECT book_id FROM loan) ORDER BY title",
    ),
    T(
        "long_books_genre",
        "library",
        "hard",
        "How many {g} books are longer than the average length (in pages) of all books?",
        "SELECT count(*) FROM book WHERE genre = '{g}' AND pages > (SELECT avg(pages) FROM book)",
        [{"g": "fantasy"}, {"g": "history"}],
    ),
    T(
        "branch_loans",
        "library",
        "extra",
        "For each branch, how many loans were made of the books it holds? Show the branch name and the number of "
        "loans, "
        "most loans first.",
        "SELECT br.name, count(*) AS n FROM branch AS br JOIN book AS b ON b.branch_id = br.branch_id "
        "JOIN loan AS l ON l.book_id = b.book_id GROUP BY br.branch_id, br.name ORDER BY n DESC, br.name",
    ),
    T(
        "popular_authors",
        "library",
        "extra",
        "Which {k} authors' books were loaned most often? Give the author name and the number of loans, most first, "
        "ties by name.",
        "SELECT a.name, count(*) AS n FROM author AS a JOIN book AS b ON b.author_id = a.author_id "
        "JOIN loan AS l ON l.book_id = b.book_id GROUP BY a.author_id, a.name ORDER BY n DESC, a.name LIMIT {k}",
        [{"k": 3}, {"k": 5}],
    ),
    T(
        "avg_loan_days",
        "library",
        "extra",
        "What is the average loan duration in days of returned loans of {g} books, rounded to 1 decimal?",
        "SELECT round(avg(julianday(l.return_date) - julianday(l.loan_date)), 1) FROM loan AS l "
        "JOIN book AS b ON l.book_id = b.book_id WHERE l.return_date IS NOT NULL AND b.genre = '{g}'",
        [{"g": "science"}, {"g": "fiction"}],
    ),
    T(
        "late_members_city",
        "library",
        "extra",
        "Which cities have members who together paid more than {x} in fines? Give the city and the total fines, "
        "largest total first.",
        "SELECT m.city, sum(l.fine) AS total FROM member AS m JOIN loan AS l ON l.member_id = m.member_id "
        "GROUP BY m.city HAVING sum(l.fine) > {x} ORDER BY total DESC, m.city",
        [{"x": 80}, {"x": 100}],
    ),
    T(
        "books_before",
        "library",
        "easy",
        "How many books were published before {y}?",
        "SELECT count(*) FROM book WHERE published_year < {y}",
        [{"y": 1950}, {"y": 1980}],
    ),
    T(
        "loans_of_member",
        "library",
        "medium",
        "How many loans has {name} made?",
        "SELECT count(*) FROM loan AS l JOIN member AS m ON l.member_id = m.member_id WHERE m.name = '{name}'",
        "SELECT name FROM member WHERE member_id IN (12, 140, 250)",
    ),
    T(
        "genre_most_loans_type",
        "library",
        "extra",
        "Which book genre do members with a {t} membership borrow most often? Give the genre and the number of loans.",
        "SELECT b.genre, count(*) AS n FROM loan AS l JOIN member AS m ON l.member_id = m.member_id "
        "JOIN book AS b ON b.book_id = l.book_id WHERE m.membership = '{t}' GROUP BY b.genre ORDER BY n DESC, b.genre "
        "LIMIT 1",
        [{"t": "student"}, {"t": "premium"}],
    ),
    T(
        "branch_oldest",
        "library",
        "easy",
        "Which branch opened first? Give its name and city.",
        "SELECT name, city FROM branch ORDER BY opened_year LIMIT 1",
    ),
    T(
        "member_since",
        "library",
        "medium",
        "How many members joined in each year from {a} to {b}? Show the year and the count in year order.",
        "SELECT substr(join_date, 1, 4) AS y, count(*) FROM member WHERE substr(join_date, 1, 4) BETWEEN '{a}' AND "
        "'{b}' "
        "GROUP BY y ORDER BY y",
        [{"a": "2016", "b": "2018"}, {"a": "2020", "b": "2023"}],
    ),
    # ---------------------------------------------------------------- music
    T(
        "tracks_genre",
        "music",
        "easy",
        "How many tracks are in the {g} genre?",
        "SELECT count(*) FROM track WHERE genre = '{g}'",
        [{"g": "jazz"}, {"g": "folk"}, {"g": "blues"}],
    ),
    T(
        "albums_year",
        "music",
        "easy",
        "List the titles of the albums released in {y}, alphabetically.",
        "SELECT title FROM album WHERE release_year = {y} ORDER BY title",
        [{"y": 2015}, {"y": 2020}],
    ),
    T(
        "longest_track",
        "music",
        "easy",
        "How long is the longest track, in seconds?",
        "SELECT max(duration_s) FROM track",
    ),
    T(
        "artists_country",
        "music",
        "easy",
        "Which artists come from {c}? List their names alphabetically.",
        "SELECT name FROM artist WHERE country = '{c}' ORDER BY name",
        [{"c": "Spain"}, {"c": "Norway"}],
    ),
    T(
        "albums_of_artist",
        "music",
        "medium",
        "How many albums has {name} released?",
        "SELECT count(*) FROM album AS al JOIN artist AS ar ON al.artist_id = ar.artist_id WHERE ar.name = '{name}'",
        "SELECT name FROM artist WHERE artist_id IN (3, 19, 44)",
    ),
    T(
        "plays_album",
        "music",
        "medium",
        "What is the total number of plays of the tracks on the album '{t}'?",
        "SELECT sum(tr.plays) FROM track AS tr JOIN album AS al ON tr.album_id = al.album_id WHERE al.title = '{t}'",
        "SELECT title AS t FROM album WHERE album_id IN (10, 77, 150)",
    ),
    T(
        "albums_per_label",
        "music",
        "medium",
        "How many albums has each label released? Show the label and the count, most albums first.",
        "SELECT label, count(*) AS n FROM album GROUP BY label ORDER BY n DESC, label",
    ),
    T(
        "avg_duration_genre",
        "music",
        "medium",
        "What is the average track duration of each genre, rounded to 1 decimal? Show genre and average, ordered by "
        "genre.",
        "SELECT genre, round(avg(duration_s), 1) FROM track GROUP BY genre ORDER BY genre",
    ),
    T(
        "prolific_artists",
        "music",
        "hard",
        "Which artists have released more than {n} albums? List their names alphabetically.",
        "SELECT ar.name FROM artist AS ar JOIN album AS al ON al.artist_id = ar.artist_id GROUP BY ar.artist_id, "
        "ar.name "
        "HAVING count(*) > {n} ORDER BY ar.name",
        [{"n": 4}, {"n": 5}],
    ),
    T(
        "unlisted_tracks",
        "music",
        "hard",
        "How many tracks are not on any playlist?",
        "SELECT count(*) FROM track WHERE track_id NOT IN (SELECT track_id FROM playlist_track)",
    ),
    T(
        "diverse_playlists",
        "music",
        "hard",
        "Which playlists contain tracks of at least {n} different genres? Give the playlist names.",
        "SELECT p.name FROM playlist AS p JOIN playlist_track AS pt ON pt.playlist_id = p.playlist_id "
        "JOIN track AS t ON t.track_id = pt.track_id GROUP BY p.playlist_id, p.name HAVING count(DISTINCT t.genre) >= "
        "{n}",
        [{"n": 8}],
    ),
    T(
        "label_without_year",
        "music",
        "hard",
        "Which labels released no album between {a} and {b} (inclusive)? Give the label names.",
        "SELECT DISTINCT label FROM album EXCEPT SELECT label FROM album WHERE release_year BETWEEN {a} AND {b}",
        [{"a": 1990, "b": 1993}, {"a": 1975, "b": 1979}],
    ),
    T(
        "short_tracks",
        "music",
        "easy",
        "How many tracks are shorter than {s} seconds?",
        "SELECT count(*) FROM track WHERE duration_s < {s}",
        [{"s": 120}, {"s": 180}],
    ),
    T(
        "playlist_sizes_owner",
        "music",
        "medium",
        "How many tracks does each playlist have? Show the playlist name and the number of tracks, largest first, ties "
        "by name, for the {k} largest playlists.",
        "SELECT p.name, count(*) AS n FROM playlist AS p JOIN playlist_track AS pt ON pt.playlist_id = p.playlist_id "
        "GROUP BY p.playlist_id, p.name ORDER BY n DESC, p.name LIMIT {k}",
        [{"k": 3}, {"k": 6}],
    ),
    T(
        "label_of_album",
        "music",
        "easy",
        "Which label released the album '{t}'?",
        "SELECT label FROM album WHERE title = '{t}'",
        "SELECT title AS t FROM album WHERE album_id IN (25, 120)",
    ),
    T(
        "top_artists_plays",
        "music",
        "extra",
        "Which {k} artists have the most plays over all their tracks? Show name and total plays, most first.",
        "SELECT ar.name, sum(t.plays) AS total FROM artist AS ar JOIN album AS al ON al.artist_id = ar.artist_id "
        "JOIN track AS t ON t.album_id = al.album_id GROUP BY ar.artist_id, ar.name "
        "ORDER BY total DESC, ar.name LIMIT {k}",
        [{"k": 5}, {"k": 3}],
    ),
    T(
        "playlist_listing",
        "music",
        "extra",
        "List the tracks of the playlist '{p}' in playlist order: track title and artist name.",
        "SELECT t.title, ar.name FROM playlist AS p JOIN playlist_track AS pt ON pt.playlist_id = p.playlist_id "
        "JOIN track AS t ON t.track_id = pt.track_id JOIN album AS al ON al.album_id = t.album_id "
        "JOIN artist AS ar ON ar.artist_id = al.artist_id WHERE p.name = '{p}' ORDER BY pt.position",
        "SELECT name AS p FROM playlist WHERE playlist_id IN (2, 9)",
    ),
    T(
        "genre_plays_long",
        "music",
        "extra",
        "Among tracks longer than {s} seconds, which genre has the highest average number of plays? Give the genre.",
        "SELECT genre FROM track WHERE duration_s > {s} GROUP BY genre ORDER BY avg(plays) DESC, genre LIMIT 1",
        [{"s": 300}, {"s": 400}],
    ),
    T(
        "first_album_per_artist",
        "music",
        "extra",
        "For every artist from {c}, give the artist name and the title of their earliest album (ties by title), "
        "ordered "
        "by artist name.",
        "WITH ranked AS (SELECT ar.name AS artist, al.title, row_number() OVER (PARTITION BY ar.artist_id "
        "ORDER BY al.release_year, al.title) AS rn FROM artist AS ar JOIN album AS al ON al.artist_id = ar.artist_id "
        "WHERE ar.country = '{c}') SELECT artist, title FROM ranked WHERE rn = 1 ORDER BY artist",
        [{"c": "Italy"}, {"c": "France"}],
    ),
]


def _instances(template: Template, dbs: dict[str, Path]) -> list[dict[str, Any]]:
    if template.params is None:
        return [{}]
    if isinstance(template.params, list):
        return template.params
    conn = sqlite3.connect(dbs[template.db].resolve().as_uri() + "?mode=ro", uri=True)
    try:
        cursor = conn.execute(template.params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        conn.close()


def build_tasks(cache_dir: str | Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{"train": [...], "test": [...]}`` of Spider-format entries (db_id, question, query, hardness)."""
    dbs = ensure_databases(cache_dir)
    out: dict[str, list[dict[str, Any]]] = {"train": [], "test": []}
    for template in TEMPLATES:
        split = split_of(f"{template.db}:{template.key}")
        for values in _instances(template, dbs):
            out[split].append(
                {
                    "db_id": template.db,
                    "question": template.question.format(**values),
                    "query": template.query.format(**values),
                    "hardness": template.hardness,
                    "template": f"{template.db}:{template.key}",
                }
            )
    return out


def render(tasks: list[dict[str, Any]]) -> str:
    """The file text of one split (stable formatting: one entry per line)."""
    return "[\n" + ",\n".join(json.dumps(t, ensure_ascii=False, sort_keys=True) for t in tasks) + "\n]\n"


def main(argv: list[str] | None = None) -> int:
    target = Path(argv[0]) if argv else HERE
    with tempfile.TemporaryDirectory() as tmp:
        splits = build_tasks(tmp)
    for split, tasks in splits.items():
        (target / f"{split}.json").write_text(render(tasks), encoding="utf-8")
        print(f"{split}: {len(tasks)} tasks -> {target / f'{split}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
