"""The metadata filter language, compiled once per request into predicates.

`parse.py` is the entry (`parse_filter`); `json_text.py` reads strict JSON
text, `language.py` names the fields, kinds, operators and limits,
`compiler.py` walks the tree, and `operands.py`, `predicates.py`,
`payload.py` make the tests. It imports model only.
"""
