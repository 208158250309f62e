"""Named by the corpus specs and pipelines so that their code exists; nothing in the corpus runs."""
raise SystemExit("corpus files never run")
