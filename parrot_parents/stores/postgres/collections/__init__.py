"""A PostgreSQL collection as a thing: its lifecycle (open, create, drop), schema, model
contract, documents table, reads other than searches, catalog and backfill."""
