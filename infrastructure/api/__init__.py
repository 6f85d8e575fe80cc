"""The HTTP service (``mace serve``): FastAPI on uvicorn."""
