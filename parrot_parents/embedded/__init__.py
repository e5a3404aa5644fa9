"""The embedded PostgreSQL: started, found again, diagnosed and restarted; it stores nothing."""
