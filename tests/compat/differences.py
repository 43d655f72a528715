"""Why a test's outcome differs between logbroker and Apache Kafka, for every test that does.

REASONS[(suite, test)] is one or two sentences a reader of docs/compatibility.md can check: what
the test exercises, what each broker does, and why logbroker's answer is right (or what is left).
A difference without an entry here fails `python -m tests.compat`.
"""

REASONS: dict[tuple[str, str], str] = {
}
