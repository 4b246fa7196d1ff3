"""The tunehub service: FastAPI app, job queue, CLI and HTTP client."""
