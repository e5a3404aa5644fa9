"""How rows enter and leave a PostgreSQL collection: the bulk writer."""
