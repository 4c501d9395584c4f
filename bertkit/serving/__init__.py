"""`bertkit serve`: an HTTP JSON API over a model directory (the `serve` extra: FastAPI + uvicorn)."""
