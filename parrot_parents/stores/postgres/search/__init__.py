"""How a PostgreSQL collection is searched: the searcher, the request, its statements, the
lexical backends and the filter plans."""
