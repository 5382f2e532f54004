"""Reading a Filter's condition from Spark's plan text (the Spark Connect path of lake.sql)."""
from skiplake.spark.query.plan_conditions import condition_sql, readable_strings

TYPES = {"id": "long", "k": "long", "s": "string", "dt": "date", "ts": "timestamp", "p": "decimal(7,2)",
         "x": "double", "f": "boolean"}
STRINGS = readable_strings({"x y", "AAAAAAAAICAAAAAA", "a", "b"})


def sql(text: str, strings=STRINGS):
    return condition_sql(text, TYPES, strings)


def test_comparisons_of_each_type():
    assert sql("(isnotnull(s#8) AND ((s#8 = x y) AND id#6L IN (1,2,3)))") == \
        "(s IS NOT NULL) AND (s = 'x y') AND (id IN (1, 2, 3))"
    assert sql("((dt#22 >= 2000-02-01) AND (ts#3 < 2001-01-01 10:00:00.5))") == \
        "(dt >= DATE'2000-02-01') AND (ts < TIMESTAMP'2001-01-01 10:00:00.5')"
    assert sql("(p#1 <= 10.50)") == "(p <= 10.50)"
    assert sql("(5 > k#2L)") == "(k < 5)"
    assert sql("(f#4 = true)") == "(f = true)"
    assert sql("(x#9 > 1.0E10)") == "(x > CAST(1.0E10 AS DOUBLE))"
    assert sql("s#21 INSET a, b") == "(s IN ('a', 'b'))"


def test_or_only_when_every_branch_reads():
    assert sql("((k#2L = 1) OR (k#2L = 2))") == "((k = 1) OR (k = 2))"
    assert sql("((k#2L = 1) OR (upper(s#8) = A))") is None
    assert sql("(((k#2L = 1) OR (upper(s#8) = A)) AND (k#2L > 0))") == "(k > 0)"


def test_uncertain_conjuncts_are_left_out():
    # A string the query does not hold verbatim, a cast column, two columns, a function.
    assert sql("(s#8 = zzz)") is None
    assert sql("(cast(k#2L as int) = 1)") is None
    assert sql("(k#2L = id#6L)") is None
    assert sql("(isnotnull(k#2L) AND (length(s#8) = 3))") == "(k IS NOT NULL)"
    # An unknown column, or a literal that does not read as its type.
    assert sql("(zz#1 = 1)") is None
    assert sql("(dt#22 = 2000-1-1)") is None
    assert sql("(k#2L = 1.5)") is None


def test_a_string_holding_the_plans_punctuation_turns_strings_off():
    risky = readable_strings({"a", "b AND c"})
    assert risky == frozenset()
    assert sql("(s#8 = a)", risky) is None
    assert readable_strings({"x", "(y"}) == frozenset()
    assert readable_strings({"x", "p, q"}) == frozenset()
    # Numbers and dates do not depend on it.
    assert sql("(k#2L = 1)", risky) == "(k = 1)"


def test_an_and_that_is_not_spark_s_own_is_not_split():
    # A folded literal `a AND b` inside a comparison: three pieces where Spark prints two.
    assert sql("(isnotnull(s#8) AND (s#8 = a AND b))") == "(s IS NOT NULL)"
