import dspy


class RewriteQuery(dspy.Signature):
    """Rewrite the question into a better search query for a document collection.

    Keep the entities and the information need; drop filler words; use different wording from
    the queries that already failed. Write the query in the language of the question. Return only
    the query text."""

    question: str = dspy.InputField()
    failed_queries: list[str] = dspy.InputField(desc="queries that returned no relevant passage")
    query: str = dspy.OutputField()
