"""The three retrieval lanes (semantic, lexical, salience), their fusion and packing, and the
Retriever that runs them."""
