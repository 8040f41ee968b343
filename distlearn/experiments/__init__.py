"""One module per paper table or figure, plus the quickstart job; each returns data, plots optional."""
