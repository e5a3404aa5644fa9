"""How rows enter and leave a PostgreSQL collection: the document writes and the bulk writer."""
