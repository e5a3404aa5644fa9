"""What a stored row is, the same in every store: its ids, markers, metadata values and
sentences."""
