"""Read views: what a route or a page shows, read from the store, then built by the pure
builders of `service.app.responses`."""
