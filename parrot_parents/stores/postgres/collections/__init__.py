"""A PostgreSQL collection as a thing: its creation, schema, model contract, documents table,
catalog and backfill."""
