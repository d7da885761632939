"""Recall: the pure logic that picks and orders memories for a query.

`filters` compiles the metadata filter language into cheap predicates;
`ranking` scores candidates by similarity x decay x reinforcement and keeps
the best `top_k`. Neither module does any I/O: the recall engine feeds them
decrypted records and distances.
"""
