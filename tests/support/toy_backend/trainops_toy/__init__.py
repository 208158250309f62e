"""A toy trainops backend, as a third party would write one: its own package, its options type, one entry point."""
